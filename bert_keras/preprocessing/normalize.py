"""BERT's basic tokenization, in-graph: split text into words, normalise each character.

The reference is HF tokenizers' BertNormalizer + BertPreTokenizer, google-research's BasicTokenizer rules as
HF implements them, character by character (two departures, where HF is wrong, are in wordpiece.py):
  * dropped: NUL, U+FFFD and the "other" characters Cc, Cf, Co (private use) except \\t \\n \\r; unassigned
    code points are kept, as the reference keeps them (they end as [UNK]);
  * separators: \\t \\n \\r and Unicode spaces (Zs, Zl, Zp);
  * single-character words: punctuation (P*, and all ASCII punctuation incl. $+<=>^`|~) and CJK ideographs;
  * uncased vocabularies: NFD, drop non-spacing marks (Mn), then lower-case each character on its own (no
    final-sigma rule: Σ -> σ always, as the Rust reference does; tf.strings.lower on whole words would not).
Text is cut from the ORIGINAL (so every character keeps its byte offsets), then each character is normalised
alone; characters that normalise to nothing vanish. The tokenizer cuts only around words holding characters
outside printable ASCII (split_segments_flat) and lets FastWordpiece split the normalised segments into words;
split_words_with_offsets, which cuts every word, serves the vocabulary builder.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.regex_split_ops import gen_regex_split_ops

# CJK Unified Ideographs and extensions, compatibility ideographs: google-research's _is_chinese_char ranges.
# (HF tokenizers' Rust port starts the fifth range at 0x2B920, a typo; we keep google-research's 0x2B820.)
CJK = (r"\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}"
       r"\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}")
SEPARATORS = r"[\t\n\r\p{Z}]"
PUNCTUATION_OR_CJK = r"[\p{P}!-/:-@\[-`{-~" + CJK + "]"
# Uncased only: characters that become punctuation once accents are stripped (NFD, drop Mn), so the reference,
# which normalises before it splits, splits them: GREEK VARIA -> `, NOT EQUAL TO -> =, NOT LESS-THAN -> <,
# NOT GREATER-THAN -> >. The only four in Unicode (tests/preprocessing/test_normalize.py derives the set).
PUNCTUATION_AFTER_ACCENT_STRIPPING = r"\x{1FEF}\x{2260}\x{226E}\x{226F}"
# RE2's \p{C} is Cc Cf Co Cs (no Cn); Cs cannot occur in UTF-8.
DROPPED = r"[\p{C}\x{FFFD}]"
# Text that needs no per-character work: printable ASCII and \t \n \r, with no word of more than 100
# characters (only letters and digits join into words; every other such character ends one). One pattern, not
# "ASCII and not a long word": the route check scans every string of every batch, and one scan is ~20% cheaper.
PLAIN_TEXT = r"(?:[A-Za-z0-9]{0,100}[ -/:-@\[-`{-~\t\n\r])*[A-Za-z0-9]{0,100}"
# A run of letters, digits and characters outside printable ASCII that holds at least one of the latter: the
# words (and whatever separates them inside the run) that need per-character normalisation. Everything between
# two such runs is printable ASCII (with \t \n \r) and starts and ends at a word boundary.
SPECIAL_RUN = r"[A-Za-z0-9]*(?:[^ -~\t\n\r][A-Za-z0-9]*)+"
# A segment made only of these normalises by ASCII lower-casing alone, byte for byte.
PLAIN_SEGMENT = r"[ -~\t\n\r]*"


def _split_patterns(lower_case: bool) -> tuple[str, str]:
    """(delimiters, delimiters kept as words) for RegexSplitWithOffsets."""
    kept = PUNCTUATION_OR_CJK
    if lower_case:
        kept = kept[:-1] + PUNCTUATION_AFTER_ACCENT_STRIPPING + "]"
    # regex_split keeps a delimiter only when the delimiter pattern matches it too.
    return f"{SEPARATORS}|{kept}", kept


def _without_nul(text):
    # TF.Text's RegexSplitWithOffsets stops at a NUL byte (the rest of the string is lost). NUL is dropped by
    # BERT anyway, so it becomes \x01, another dropped one-byte character: offsets stay the same.
    return tf.strings.regex_replace(text, r"\x00", "\x01")


def split_words_with_offsets(text, lower_case: bool = True):
    """[B] strings -> (words [B, W], starts [B, W], ends [B, W]): byte offsets into the original text."""
    return tf_text.regex_split_with_offsets(_without_nul(text), *_split_patterns(lower_case))


def split_segments_flat(text):
    """[B] strings -> (segments [N], starts [N] int64 byte offsets into the original text, row splits [B + 1]).

    Cuts each string into alternating plain segments (printable ASCII, any number of words) and SPECIAL_RUNs,
    in order, nothing dropped. Words never straddle a cut, so each segment can be normalised on its own and
    handed whole to FastWordpiece's end-to-end mode, which splits it into words as the reference does (after
    normalising: see wordpiece.py). Cutting only around the rare special runs costs a fraction of a split at
    every space and punctuation mark. The raw kernel, without the RaggedTensor wrapper's shape checks."""
    segments, starts, _, splits = gen_regex_split_ops.regex_split_with_offsets(   # the wrapper's (group)s
        _without_nul(text), f"({SPECIAL_RUN})", f"({SPECIAL_RUN})")
    return segments, starts, splits


def normalize_characters(chars, lower_case: bool):
    """Single-character strings (any shape) -> their normalised strings ("" when the character is dropped)."""
    chars = tf.strings.regex_replace(chars, DROPPED, "")
    if lower_case:
        chars = tf.strings.regex_replace(tf_text.normalize_utf8(chars, "NFD"), r"\p{Mn}", "")
        chars = tf.strings.lower(chars, encoding="utf-8")
    return chars
