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

MAX_WORD_CHARS = 100          # the reference's max_input_chars_per_word

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
# "ASCII and not a long word": the route check scans every string of every batch, and one scan beats two.
PLAIN_TEXT = r"(?:[A-Za-z0-9]{0,100}[ -/:-@\[-`{-~\t\n\r])*[A-Za-z0-9]{0,100}"
# The cuts around what needs per-character normalisation: a word holding a character outside printable ASCII
# (letters, digits and such characters, at least one of the latter), or one separator, punctuation mark or CJK
# ideograph outside ASCII. Everything between two cuts is printable ASCII (with \t \n \r) and starts and ends at
# a word boundary; a special word holds no separator or punctuation but what normalisation makes (four
# characters become ASCII punctuation: see above).
_SPECIAL_WORD_CHAR = r"[^ -~\t\n\r\p{P}\p{Z}" + CJK + "]"
_SPECIAL_BREAK = r"[^ -~\t\n\r\P{P}]|[^ -~\t\n\r\P{Z}]|[" + CJK + "]"
SPECIAL_RUN = rf"[A-Za-z0-9]*(?:{_SPECIAL_WORD_CHAR}[A-Za-z0-9]*)+|{_SPECIAL_BREAK}"
# Words of more than 100 characters (the reference's limit counts characters; FastWordpiece's counts bytes):
# in normalised segments, one character at position 101 or later of such a word is swapped for a placeholder of
# the same UTF-8 width that no vocabulary entry holds (normalisation drops all four: Cc, Co), so WordPiece
# cannot match the word and makes all of it one [UNK] spanning the word, and byte offsets stay where they were.
# Four small regex ops instead of grouping pieces into words (~50 ops, each a fixed cost in tf.data, every batch).
# A word is a run of characters other than printable-ASCII separators and punctuation: exact on normalised
# segments, where the only other breaks are whole segments of one character (split_segments_flat).
LONG_WORD_PLACEHOLDERS = ("\x01", "\x80", "\ue000", "\U000f0000")
_WIDTHS = (r"\x{0}-\x{7F}", r"\x{80}-\x{7FF}", r"\x{800}-\x{FFFF}", r"\x{10000}-\x{10FFFF}")
_WORD_CHAR = r"[^ -/:-@\[-`{-~\t\n\r"                                # + "]" once a width is excluded
LONG_WORD_MARKS = tuple(
    (f"({_WORD_CHAR}]{{100,}}){_WORD_CHAR}{''.join(w for w in _WIDTHS if w != width)}]", "\\1" + placeholder)
    for width, placeholder in zip(_WIDTHS, LONG_WORD_PLACEHOLDERS))
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

    Cuts each string around its SPECIAL_RUNs (words holding a character outside printable ASCII, and single
    separators, punctuation marks and ideographs outside ASCII), keeping them and the printable-ASCII text
    between them in order, nothing dropped. Words never straddle a cut, so each segment can be normalised on its
    own and handed whole to FastWordpiece's end-to-end mode, which splits it into words as the reference does
    (after normalising: see wordpiece.py). Cutting only there costs a fraction of a cut at every space and
    punctuation mark. The raw kernel, without the RaggedTensor wrapper's shape checks."""
    segments, starts, _, splits = gen_regex_split_ops.regex_split_with_offsets(   # the wrapper's (group)s
        _without_nul(text), f"({SPECIAL_RUN})", f"({SPECIAL_RUN})")
    return segments, starts, splits


def mark_long_words(segments):
    """Normalised segments (any shape) -> the same, each word of more than 100 characters holding a placeholder
    (LONG_WORD_MARKS): its WordPiece is one [UNK]."""
    for pattern, rewrite in LONG_WORD_MARKS:
        segments = tf.strings.regex_replace(segments, pattern, rewrite)
    return segments


def normalize_characters(chars, lower_case: bool):
    """Single-character strings (any shape) -> their normalised strings ("" when the character is dropped)."""
    chars = tf.strings.regex_replace(chars, DROPPED, "")
    if lower_case:
        chars = tf.strings.regex_replace(tf_text.normalize_utf8(chars, "NFD"), r"\p{Mn}", "")
        chars = tf.strings.lower(chars, encoding="utf-8")
    return chars
