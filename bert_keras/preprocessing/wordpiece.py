"""Text -> WordPiece ids with byte offsets into the original text, exactly as the reference tokenizer.

Two routes, chosen per string, giving the same ids as HF tokenizers' BertWordPieceTokenizer on either:
  plain   printable ASCII (with \\t \\n \\r): lower-case bytes in place, then TF.Text's FastWordpiece in its
          end-to-end mode, which does BERT's whitespace/punctuation split itself. Lower-casing ASCII keeps every
          byte where it was, so its offsets are already offsets into the original. Most English text goes here.
  general everything else: words are cut from the original text (normalize.py); printable-ASCII words are
          lower-cased in place, the other words have each character normalised alone and the pieces' offsets
          in the normalised word are mapped back through the characters they came from. A word of more than 100 characters becomes [UNK] (the reference counts
          characters; FastWordpiece would count bytes, so the general route checks the length itself).
Invalid UTF-8: each invalid byte is read as U+FFFD, which BERT drops; offsets still index the original bytes.
The reference is HF tokenizers' BertWordPieceTokenizer, except where it is wrong, and then google-research's
FullTokenizer decides: special-token strings in the text ("[SEP]") stay plain text (HF would emit the real [SEP]
id, so user text could forge segment boundaries), and CJK Extension E U+2B820-U+2B91F is split as ideographs
(HF's range starts at 0x2B920, a typo). Character properties come from TF's Unicode tables, which are newer than
HF's: a few hundred characters assigned or re-classified since (new marks, punctuation) can differ.
Shapes: text [B] string -> ids, starts, ends: RaggedTensor [B, (tokens)], int32 ids, int64 offsets;
[start, end) byte ranges.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.preprocessing.normalize import (PLAIN_ASCII, PLAIN_WORD, normalize_characters,
                                                split_words_with_offsets)

MAX_WORD_CHARS = 100          # the reference's max_input_chars_per_word
UNK = "[UNK]"


class WordpieceTokenizer:
    """BERT tokenization (basic + WordPiece) on TF.Text kernels; see the module docstring."""

    def __init__(self, vocab: list[str], lower_case: bool):
        if UNK not in vocab:
            raise ValueError(f"the vocabulary has no {UNK} token; BERT vocabularies start with [PAD] [unused..] "
                             "[UNK] [CLS] [SEP] [MASK].")
        self.lower_case = lower_case
        common = dict(suffix_indicator="##", token_out_type=tf.int32, unknown_token=UNK,
                      support_detokenization=False)
        # Plain route: ASCII bytes are characters, so the kernel's byte limit is the reference's character limit.
        self._text_kernel = tf_text.FastWordpieceTokenizer(vocab, max_bytes_per_word=MAX_WORD_CHARS,
                                                           no_pretokenization=False, **common)
        # General route: words arrive split; 100 characters of up to 4 bytes each always fit the byte limit.
        self._word_kernel = tf_text.FastWordpieceTokenizer(vocab, max_bytes_per_word=4 * MAX_WORD_CHARS,
                                                           no_pretokenization=True, **common)

    def tokenize_with_offsets(self, text):
        text = tf.convert_to_tensor(text, dtype=tf.string)
        return _route(tf.strings.regex_full_match(text, PLAIN_ASCII), text, self._plain_text, self._general_text)

    def tokenize(self, text):
        return self.tokenize_with_offsets(text)[0]

    def _plain_text(self, text):
        if self.lower_case:
            text = tf.strings.lower(text)
        ids, starts, ends = self._text_kernel.tokenize_with_offsets(text)
        return ids.with_row_splits_dtype(tf.int64), starts, ends

    def _general_text(self, text):
        words, word_starts, _ = split_words_with_offsets(text, self.lower_case)           # [B, W]
        flat = words.flat_values                                                          # [N]
        ids, starts, ends = _route(tf.strings.regex_full_match(flat, PLAIN_WORD), flat,
                                   self._plain_words, self._general_words)                # [N, P], in-word
        base = tf.gather(word_starts.flat_values, ids.value_rowids())
        per_text = lambda values: words.with_flat_values(ids.with_flat_values(values)).merge_dims(1, 2)  # noqa
        return per_text(ids.flat_values), per_text(base + starts.flat_values), per_text(base + ends.flat_values)

    def _plain_words(self, words):
        """Printable-ASCII words: lower-casing keeps every byte in place, so piece offsets are in-word offsets."""
        return self._word_pieces(tf.strings.lower(words) if self.lower_case else words)

    def _general_words(self, words):
        """Other words: each character normalised alone; piece offsets mapped back through the characters."""
        chars, char_starts = tf.strings.unicode_split_with_offsets(words, "UTF-8", errors="replace")  # [N, C]
        # A character ends where the next begins (an invalid byte read as U+FFFD still spans one byte).
        word_lengths = tf.cast(tf.strings.length(words), tf.int64)[:, None]
        char_ends = tf.concat([char_starts[:, 1:], tf.RaggedTensor.from_tensor(word_lengths)], axis=1)
        normalized = normalize_characters(chars.flat_values, self.lower_case)            # [M]
        ids, piece_starts, piece_ends = self._word_pieces(
            tf.strings.reduce_join(chars.with_flat_values(normalized), axis=1))
        # Each character owns the bytes its normalisation produced; the character holding a piece's first
        # (last) byte gives the piece's start (end).
        char_bytes = tf.cast(tf.strings.length(normalized), tf.int64)
        char_base = tf.cumsum(char_bytes, exclusive=True)                                # [M], global
        word_base = tf.gather(tf.concat([char_base, [tf.reduce_sum(char_bytes)]], 0), chars.row_starts())
        piece_word = ids.value_rowids()
        first = tf.gather(word_base, piece_word) + piece_starts.flat_values
        last = tf.gather(word_base, piece_word) + piece_ends.flat_values - 1
        first_char = tf.searchsorted(char_base[None], first[None], side="right")[0] - 1
        last_char = tf.searchsorted(char_base[None], last[None], side="right")[0] - 1
        return (ids, ids.with_flat_values(tf.gather(char_starts.flat_values, first_char)),
                ids.with_flat_values(tf.gather(char_ends.flat_values, last_char)))

    def _word_pieces(self, word_text):
        """Normalised words [N] -> (ids, starts, ends) [N, P], offsets in normalised bytes; a word of more than
        100 characters becomes one [UNK] spanning the whole word."""
        too_long = tf.strings.length(word_text, unit="UTF8_CHAR") > MAX_WORD_CHARS
        ids, starts, ends = self._word_kernel.tokenize_with_offsets(tf.where(too_long, UNK, word_text))
        piece_word = ids.value_rowids()
        long_piece = tf.gather(too_long, piece_word)
        word_bytes = tf.gather(tf.cast(tf.strings.length(word_text), tf.int64), piece_word)
        starts = tf.where(long_piece, tf.zeros_like(starts.flat_values), starts.flat_values)
        ends = tf.where(long_piece, word_bytes, ends.flat_values)
        return ids.with_row_splits_dtype(tf.int64), ids.with_flat_values(starts), ids.with_flat_values(ends)


def _route(take_first, rows, first, second):
    """Runs `first` on the rows where take_first holds and `second` on the others; each returns a tuple of
    RaggedTensors with one row per input row, and the rows come back in their original order."""
    first_rows = tf.where(take_first)[:, 0]
    second_rows = tf.where(tf.logical_not(take_first))[:, 0]
    a, b = first(tf.gather(rows, first_rows)), second(tf.gather(rows, second_rows))
    back = tf.math.invert_permutation(tf.concat([first_rows, second_rows], 0))
    return tuple(tf.gather(tf.concat([x, y], 0), back) for x, y in zip(a, b))
