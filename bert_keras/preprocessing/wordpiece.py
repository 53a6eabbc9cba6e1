"""Text -> WordPiece ids with byte offsets into the original text, exactly as the reference tokenizer.

Two routes, chosen per string, giving the same ids as HF tokenizers' BertWordPieceTokenizer on either:
  plain   printable ASCII (with \\t \\n \\r) with no word over 100 characters: lower-case bytes in place, then
          TF.Text's FastWordpiece in its end-to-end mode, which does BERT's whitespace/punctuation split itself.
          Lower-casing ASCII keeps every byte where it was, so its offsets are already offsets into the
          original. Most English text goes here.
  general everything else: the string is cut (normalize.py's split_segments_flat) into plain segments
          (printable ASCII, lower-cased in place) and special ones (a word holding a character outside
          printable ASCII, or one such separator, punctuation mark or ideograph; each character normalised
          alone); each normalised segment goes whole to the same end-to-end FastWordpiece, which splits it into
          words after normalisation, as the reference does. Pieces' offsets in a normalised special segment
          are mapped back through the characters they came from. A word of more than 100 characters gets a
          placeholder character of the same width that no vocabulary entry holds (normalize.py's
          mark_long_words), so WordPiece makes it one [UNK] (the reference counts characters; FastWordpiece's
          limit counts bytes). Cutting only around special words, not at every word, is what makes this route
          cheap: real text that is not plain is still mostly ASCII words. (FastWordpiece splits at ICU's
          White_Space and punctuation, which after normalisation are the reference's separators and
          punctuation: the fuzz tests check it against both references.)
Both routes run the same FastWordpiece model, built once (building one is costly).
Why not TF.Text's FastBertNormalizer for the general route: it folds with NFKC-like rules (³ -> 3, ﬁ -> fi,
ǅ -> dz) and keeps U+0085 as a break, so it differs from the reference on real texts holding such characters.

Speed: everything runs on flat tensors with the raw TF.Text kernels (no RaggedTensor helpers, whose shape
checks add ~1,000 graph nodes to every call), because in `tf.data` the graph runs once per batch and every op
has a fixed cost however small its tensors, so fewer ops beat cleverer ones (docs/performance.md). Rows are
routed with dynamic_partition and the results put back in order with one ragged gather. Called eagerly (a
notebook, the pretraining data tool), each op costs Python time under the GIL: `tokenize` (ids only) skips the
general route's offset work, and wrappers that run several ops (tf.searchsorted, see ragged_rows.py; slicing in
loops) are avoided.

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

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_string_ops
from tensorflow_text.core.pybinds.pywrap_fast_wordpiece_tokenizer_model_builder import build_fast_wordpiece_model
from tensorflow_text.python.ops.fast_wordpiece_tokenizer import gen_fast_wordpiece_tokenizer

from bert_keras.preprocessing.normalize import (LONG_WORD_PLACEHOLDERS, MAX_WORD_CHARS, PLAIN_SEGMENT, PLAIN_TEXT,
                                                mark_long_words, normalize_characters,
                                                split_segments_flat)
from bert_keras.preprocessing.ragged_rows import row_ids, upper_bound

UNK = "[UNK]"


class WordpieceTokenizer:
    """BERT tokenization (basic + WordPiece) on TF.Text kernels; see the module docstring."""

    def __init__(self, vocab: list[str], lower_case: bool):
        if UNK not in vocab:
            raise ValueError(f"the vocabulary has no {UNK} token; BERT vocabularies start with [PAD] [unused..] "
                             "[UNK] [CLS] [SEP] [MASK].")
        self.lower_case = lower_case
        # One model for both routes (building one is costly): end-to-end mode, which splits text at
        # whitespace and punctuation (ICU's, with BERT's ASCII and CJK additions) before WordPiece; the general
        # route hands it normalised segments, which it splits the same way. Its byte limit fits 100 characters of
        # up to 4 bytes; the reference's 100-character limit is the routes' own (PLAIN_TEXT keeps long words off
        # the plain route, mark_long_words makes them [UNK] on the general one).
        # TF.Text's own builder; its tokenizer class would turn the ~1.7 MB model into a Python list of ints on the
        # way to a tensor, so the bytes become the uint8 tensor directly, at the first call (`_model`): building
        # a tokenizer runs no TensorFlow op, so a process that has only built one may still fork workers.
        self._model_bytes = build_fast_wordpiece_model(vocab, 4 * MAX_WORD_CHARS, "##", UNK, False, False)
        self._model_tensor = None
        entries = "".join(vocab)
        held = [p for p in LONG_WORD_PLACEHOLDERS if p in entries]
        if held:
            raise ValueError(f"vocabulary entries hold {held!r}, which normalisation drops and the tokenizer uses "
                             "to mark words of more than 100 characters")

    @property
    def _model(self):
        """The model as a uint8 tensor, made eagerly (init_scope) the first time a call needs it."""
        if self._model_tensor is None:
            with tf.init_scope():
                self._model_tensor = tf.constant(np.frombuffer(self._model_bytes, np.uint8))
        return self._model_tensor

    def tokenize(self, text):
        """[B] strings -> RaggedTensor [B, (tokens)] int32 ids."""
        return self._tokenize(text, offsets=False)[0]

    def tokenize_with_offsets(self, text):
        """[B] strings -> (ids, starts, ends): RaggedTensors [B, (tokens)], [start, end) bytes of the original."""
        return self._tokenize(text, offsets=True)

    def _tokenize(self, text, offsets: bool):
        # Without offsets the general route stops once it has the ids: called eagerly (the pretraining data
        # tool, a notebook) that is ~35 fewer ops to dispatch; in a graph the unused ops would be pruned anyway.
        text = tf.reshape(tf.convert_to_tensor(text, dtype=tf.string), [-1])
        # Plain: printable ASCII without a word of more than 100 characters (a run of 101 letters or digits:
        # every other printable ASCII character splits words), which must become [UNK].
        general = tf.cast(tf.logical_not(tf.strings.regex_full_match(text, PLAIN_TEXT)), tf.int32)
        plain_rows, general_rows = tf.dynamic_partition(tf.range(tf.size(text)), general, 2)
        plain_text, general_text = tf.dynamic_partition(text, general, 2)
        routes = (self._plain_text(plain_text, offsets), self._general_text(general_text, offsets))
        values, splits = _stitch_rows((plain_rows, general_rows), routes)
        return tuple(tf.RaggedTensor.from_row_splits(v, splits, validate=False) for v in values)

    def _plain_text(self, text, offsets: bool):
        """[R] printable-ASCII strings -> flat [ids] or [ids, starts, ends], and row splits [R + 1]."""
        if self.lower_case:
            text = tf.strings.lower(text)
        _, ids, splits, starts, ends = gen_fast_wordpiece_tokenizer.fast_wordpiece_tokenize_with_offsets(
            input_values=text, wp_model=self._model)
        ids = tf.cast(ids, tf.int32)
        return ([ids, starts, ends] if offsets else [ids]), splits

    def _general_text(self, text, offsets: bool):
        """[R] other strings -> flat [ids] or [ids, starts, ends], and row splits [R + 1]."""
        segments, segment_starts, segment_splits = split_segments_flat(text)                  # [N], [R + 1]
        special = tf.cast(tf.logical_not(tf.strings.regex_full_match(segments, PLAIN_SEGMENT)), tf.int32)
        plain_at, special_at = tf.dynamic_partition(tf.range(tf.size(segments)), special, 2)
        plain_segments, special_segments = tf.dynamic_partition(segments, special, 2)
        # Printable-ASCII segments: lower-casing keeps every byte in place.
        plain_norm = tf.strings.lower(plain_segments) if self.lower_case else plain_segments
        # Special runs: each character normalised alone.
        char_splits, code_points, char_starts = gen_string_ops.unicode_decode_with_offsets(
            special_segments, input_encoding="UTF-8", errors="replace")                       # [G + 1], [M]
        num_chars = tf.size(code_points, out_type=tf.int64)
        chars = gen_string_ops.unicode_encode(code_points, tf.range(num_chars + 1), output_encoding="UTF-8")
        char_norm = normalize_characters(chars, self.lower_case)                               # [M]
        char_segment = row_ids(char_splits, num_chars)                                         # [M]
        special_norm = gen_string_ops.unsorted_segment_join(char_norm, char_segment, tf.size(special_segments))
        normalized = mark_long_words(tf.dynamic_stitch([plain_at, special_at], [plain_norm, special_norm]))

        ids, piece_starts, piece_ends, piece_splits = self._word_pieces(normalized)    # offsets in-segment
        splits = tf.gather(piece_splits, segment_splits)
        if not offsets:
            return [ids], splits
        num_pieces = tf.size(ids, out_type=tf.int64)
        piece_segment = row_ids(piece_splits, num_pieces)                                      # [P]
        base = tf.gather(segment_starts, piece_segment)
        starts, ends = base + piece_starts, base + piece_ends                   # right for plain segments
        # Pieces of special runs: each character owns the bytes its normalisation produced; the character
        # holding a piece's first (last) byte gives the piece's start (end) in the original.
        segment_lengths = tf.cast(tf.strings.length(special_segments), tf.int64)
        next_start = tf.concat([char_starts[1:], [0]], 0)
        last_of_segment = tf.scatter_nd(tf.reshape(char_splits[1:] - 1, [-1, 1]),
                                        tf.ones_like(segment_lengths, tf.bool), [num_chars])
        char_ends = tf.where(last_of_segment, tf.gather(segment_lengths, char_segment), next_start)  # in-run
        char_bytes = tf.cast(tf.strings.length(char_norm), tf.int64)
        char_base = tf.cumsum(char_bytes, exclusive=True)                                      # global
        segment_base = tf.gather(tf.concat([char_base, [tf.reduce_sum(char_bytes)]], 0), char_splits[:-1])
        segment_rank = tf.scatter_nd(tf.reshape(special_at, [-1, 1]), tf.range(tf.size(special_at)),
                                     tf.size(segments, out_type=tf.int32)[None])               # [N] -> [G]
        piece_special = tf.cast(tf.gather(special, piece_segment), tf.int32)
        plain_pieces, special_pieces = tf.dynamic_partition(tf.range(tf.size(ids)), piece_special, 2)
        rank = tf.gather(segment_rank, tf.gather(piece_segment, special_pieces))
        first = tf.gather(segment_base, rank) + tf.gather(piece_starts, special_pieces)
        last = tf.gather(segment_base, rank) + tf.gather(piece_ends, special_pieces) - 1
        first_char = upper_bound(char_base, first) - 1
        last_char = upper_bound(char_base, last) - 1
        special_base = tf.gather(base, special_pieces)
        starts = tf.dynamic_stitch([plain_pieces, special_pieces],
                                   [tf.gather(starts, plain_pieces),
                                    special_base + tf.gather(char_starts, first_char)])
        ends = tf.dynamic_stitch([plain_pieces, special_pieces],
                                 [tf.gather(ends, plain_pieces), special_base + tf.gather(char_ends, last_char)])
        return [ids, starts, ends], splits

    def _word_pieces(self, segments):
        """Normalised segments [N] -> flat (ids int32, starts, ends) [P] in normalised bytes and splits [N + 1].
        FastWordpiece's end-to-end mode splits each segment into words itself (on the normalised text, as the
        reference does); words of more than 100 characters hold a placeholder by now and come out [UNK]."""
        _, ids, splits, starts, ends = gen_fast_wordpiece_tokenizer.fast_wordpiece_tokenize_with_offsets(
            input_values=segments, wp_model=self._model)
        return tf.cast(ids, tf.int32), starts, ends, splits


def _stitch_rows(rows, routes):
    """Puts rows tokenized by separate routes back in their original order.

    rows: per route, the original row indices [R_k]; routes: per route, a list of flat values ([ids] or [ids,
    starts, ends]) and row splits [R_k + 1]. Returns the flat values and row splits [B + 1] in original row
    order."""
    values = [tf.concat(route_values, 0) for route_values in zip(*(values for values, _ in routes))]
    lengths = tf.concat([splits[1:] - splits[:-1] for _, splits in routes], 0)               # [B], route order
    rows = tf.concat(rows, 0)
    row_starts = tf.dynamic_stitch([rows], [tf.cumsum(lengths, exclusive=True)])           # where a row begins
    row_lengths = tf.dynamic_stitch([rows], [lengths])
    order = tf.ragged.range(row_starts, row_starts + row_lengths).flat_values
    splits = tf.concat([tf.zeros([1], row_lengths.dtype), tf.cumsum(row_lengths)], 0)
    return [tf.gather(v, order) for v in values], splits
