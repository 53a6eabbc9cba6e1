"""Raw text -> the encoder's inputs on LiteRT builtins and TF.Text's TFLite kernels only (the LiteRT export).

BertPreprocessor's graph uses RegexSplitWithOffsets, NormalizeUTF8 and RaggedRange, which have no TFLite kernel.
This is the same tokenization on four TF.Text ops that do (FastBertNormalize, FastWordpieceTokenizeWithOffsets,
TFText>ByteSplitWithOffsets, RaggedTensorToTensor is not even needed) plus dense builtin arithmetic:

  1. FastBertNormalize with our own table (litert_normalizer.py): every character normalised alone, exactly as
     bert_keras.preprocessing.normalize does (separators -> " ", controls dropped, NFD + strip Mn + lower).
  2. FastWordpiece's end-to-end mode on the normalised text, the same model BertPreprocessor builds: it splits
     at whitespace, punctuation and CJK ideographs as the reference does after normalising.
  3. Words of more than 100 characters become one [UNK] (the reference counts characters, FastWordpiece bytes):
     the characters of each word are counted from the normalised bytes (ByteSplit: bytes that are not UTF-8
     continuation bytes), and a long word's pieces are replaced by one [UNK] spanning it.
  4. Offsets: FastBertNormalize maps each normalised byte to the original byte it came from; a piece ends
     where the original character holding its last byte ends (that character's UTF-8 length read from its
     lead byte), so dropped characters after a word are not part of it, as in the reference.
  5. Packing: [CLS] a [SEP] (b [SEP]), truncation with packer.kept_lengths' closed form, padded to the batch's
     longest (x8, at most max_seq_length) or to a fixed seq_length, all by gathers over a dense position grid.

Shapes: text [B] string -> Tokens(ids int32 [N], splits int32 [B + 1], starts, ends int32 [N] byte offsets into
the original text or None). pack -> the id dict, int32 [B, L].
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
from tensorflow_text.python.ops.byte_splitter import gen_byte_splitter
from tensorflow_text.python.ops.fast_bert_normalizer import gen_fast_bert_normalizer
from tensorflow_text.python.ops.fast_wordpiece_tokenizer import gen_fast_wordpiece_tokenizer

from bert_keras.preprocessing.normalize import MAX_WORD_CHARS
from savedmodels.litert_normalizer import normalizer_model

# The custom ops a LiteRT export may hold: TF.Text's kernels in tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS.
TFTEXT_OPS = ("FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "TFText>ByteSplitWithOffsets")


@dataclasses.dataclass
class Tokens:
    ids: tf.Tensor          # int32 [N]
    splits: tf.Tensor       # int32 [B + 1]
    starts: tf.Tensor | None = None     # int32 [N], bytes of the original text
    ends: tf.Tensor | None = None

    def lengths(self):
        return self.splits[1:] - self.splits[:-1]

    def row_starts(self):
        return self.splits[:-1]


@dataclasses.dataclass
class Rows:
    """Rows cut out of a flat pool of ids: row i is ids[starts[i]:starts[i] + lengths[i]]."""
    ids: tf.Tensor
    starts: tf.Tensor
    counts: tf.Tensor

    def lengths(self):
        return self.counts

    def row_starts(self):
        return self.starts


def row_ids(splits, n):
    """Row splits [B + 1] -> the row of each of the n values [n] (dense compare: serving batches are small)."""
    return tf.reduce_sum(tf.cast(tf.range(n)[:, None] >= splits[None, 1:], tf.int32), axis=1)


def _is_char_start(values):
    """int32 bytes -> 1 where a character starts (not a UTF-8 continuation byte 0x80-0xBF), else 0. (No
    BitwiseAnd: LiteRT has no builtin for it.)"""
    return 1 - tf.cast((values >= 0x80) & (values < 0xC0), tf.int32)


def _bytes(text):
    """[B] strings -> (int32 bytes [M], int32 row splits [B + 1])."""
    values, splits, _, _ = gen_byte_splitter.tf_text_byte_split_with_offsets(input_values=text)
    return tf.cast(values, tf.int32), tf.cast(splits, tf.int32)


class LiteRTTokenizer:
    """The tokenizer of a BertPreprocessor, as LiteRT-convertible ops (see the module docstring)."""

    def __init__(self, preprocessor):
        vocab = preprocessor.vocab
        self.preprocessor = preprocessor
        self.normalizer = tf.constant(np.frombuffer(normalizer_model(preprocessor.lower_case), np.uint8))
        self.wordpiece = preprocessor.tokenizer._model          # the same FastWordpiece model
        self.unk_id = vocab.index("[UNK]")
        self.continues = tf.constant([token.startswith("##") for token in vocab])

    def tokenize(self, text, offsets: bool = False) -> Tokens:
        text = tf.reshape(text, [-1])
        normalized, mapping, mapping_splits = gen_fast_bert_normalizer.fast_bert_normalize(
            input_values=text, fast_bert_normalizer_model=self.normalizer, get_offsets=offsets)
        _, ids, splits, starts, ends = gen_fast_wordpiece_tokenizer.fast_wordpiece_tokenize_with_offsets(
            input_values=normalized, wp_model=self.wordpiece)
        ids, splits = tf.cast(ids, tf.int32), tf.cast(splits, tf.int32)
        starts, ends = tf.cast(starts, tf.int32), tf.cast(ends, tf.int32)
        n = tf.size(ids)
        row = row_ids(splits, n)
        # Characters per word of the normalised text: the reference's 100-character limit.
        norm_bytes, norm_splits = _bytes(normalized)
        is_char = _is_char_start(norm_bytes)
        chars_before = tf.concat([[0], tf.cumsum(is_char)], 0)                              # [M + 1]
        base = tf.gather(norm_splits, row)
        piece_chars = tf.gather(chars_before, base + ends) - tf.gather(chars_before, base + starts)
        first = tf.logical_not(tf.gather(self.continues, ids))                                # a word's first piece
        word = tf.cumsum(tf.cast(first, tf.int32)) - 1
        word_chars = tf.math.unsorted_segment_sum(piece_chars, word, n)
        long = tf.gather(word_chars, word) > MAX_WORD_CHARS
        keep = tf.reshape(tf.where(tf.logical_or(first, tf.logical_not(long))), [-1])
        kept_before = tf.concat([[0], tf.cumsum(tf.cast(tf.logical_or(first, tf.logical_not(long)), tf.int32))], 0)
        new_splits = tf.gather(kept_before, splits)
        new_ids = tf.gather(tf.where(long, self.unk_id, ids), keep)
        if not offsets:
            return Tokens(new_ids, new_splits)
        word_end = tf.math.unsorted_segment_max(ends, word, n)
        ends = tf.where(long, tf.gather(word_end, word), ends)
        mapping = tf.cast(mapping, tf.int32)
        map_base = tf.gather(tf.cast(mapping_splits, tf.int32), row)
        original_start = tf.gather(mapping, map_base + starts)
        last = tf.gather(mapping, map_base + ends - 1)          # the original byte the piece's last byte came from
        raw, raw_splits = _bytes(text)
        lead = tf.gather(raw, tf.gather(raw_splits, row) + last)
        width = 1 + tf.cast(lead >= 0xC0, tf.int32) + tf.cast(lead >= 0xE0, tf.int32) + tf.cast(lead >= 0xF0, tf.int32)
        return Tokens(new_ids, new_splits, tf.gather(original_start, keep), tf.gather(last + width, keep))


def kept_lengths(lengths: list, budget):
    """Segment lengths (1 or 2 [B] tensors) -> lengths after truncation to `budget` tokens a row: the packer's
    closed form (packer.kept_lengths), written for one or two segments without a sort."""
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], budget)]
    a, b = lengths
    short = tf.minimum(a, b)
    fits = a + b <= budget
    shorter_whole = 2 * short <= budget
    a_kept = tf.where(fits, a, tf.where(shorter_whole, tf.where(a <= b, a, budget - b), budget - budget // 2))
    b_kept = tf.where(fits, b, tf.where(shorter_whole, tf.where(a <= b, budget - a, b), budget // 2))
    return [a_kept, b_kept]


def pack(segments: list, cls_id: int, sep_id: int, pad_id: int, seq_length: int | None,
         max_seq_length: int, round_to: int = 8) -> dict:
    """Tokenized segments -> {"input_word_ids", "input_mask", "input_type_ids"} int32 [B, L]: [CLS] a [SEP]
    (b [SEP]), BertPreprocessor's lengths and truncation (round_robin = longest_first's closed form). With
    seq_length None, L is the longest row rounded up to `round_to` (8, as BertPreprocessor; 1: no padding at
    batch 1), at most max_seq_length."""
    k = len(segments)
    length = seq_length or max_seq_length
    kept = kept_lengths([s.lengths() for s in segments], length - k - 1)
    total = tf.add_n(kept) + k + 1                                                            # [B]
    if seq_length is None:
        longest = tf.reduce_max(tf.concat([total, [1]], 0))
        length = tf.minimum((longest + round_to - 1) // round_to * round_to, max_seq_length)
    positions = tf.range(length)[None, :]                                                      # [1, L]
    word_ids = tf.where(positions == 0, cls_id, pad_id) + tf.zeros_like(total)[:, None]        # [B, L]
    types = tf.zeros_like(word_ids)
    start = tf.ones_like(total)                                                                # segment's first
    for i, (segment, n) in enumerate(zip(segments, kept)):
        at = positions - start[:, None]
        inside = (at >= 0) & (at < n[:, None])
        pool = tf.concat([segment.ids, [pad_id]], 0)                # never empty
        source = tf.clip_by_value(segment.row_starts()[:, None] + at, 0, tf.size(segment.ids))
        word_ids = tf.where(inside, tf.gather(pool, source), word_ids)
        sep = start + n
        word_ids = tf.where(positions == sep[:, None], sep_id, word_ids)
        if i:
            types = tf.where(inside | (positions == sep[:, None]), i, types)
        start = sep + 1
    mask = tf.cast(positions < total[:, None], tf.int32)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": types}


class LiteRTPreprocessor:
    """Stands in for a task model's BertPreprocessor while the LiteRT graph is traced: the same call (text, or
    a tuple of segments, [B] or [B, C]) -> the id dict, on convertible ops.

    one_sequence=True (the one-text signature, inputs [1]): the ids are packed to the text's own length (no
    padding, whatever the preprocessor's seq_length) with the static shape [1, L], what
    `layers.litert_layers(one_sequence=True)` needs."""

    def __init__(self, preprocessor, one_sequence: bool = False):
        self.one_sequence = one_sequence
        self.inner = preprocessor
        self.tokenizer = LiteRTTokenizer(preprocessor)
        self.vocab, self.seq_length, self.max_seq_length = (preprocessor.vocab, preprocessor.seq_length,
                                                            preprocessor.max_seq_length)
        self.cls_id, self.sep_id, self.pad_id = preprocessor.cls_id, preprocessor.sep_id, preprocessor.pad_id
        if preprocessor.truncation not in ("round_robin", "longest_first"):
            raise ValueError(f"unknown truncation {preprocessor.truncation!r}")

    def pack(self, segments: list[Tokens]) -> dict:
        if self.one_sequence:
            packed = pack(segments, self.cls_id, self.sep_id, self.pad_id, None,
                          self.seq_length or self.max_seq_length, round_to=1)          # the same truncation
            return {k: tf.reshape(v, [1, -1]) for k, v in packed.items()}
        return pack(segments, self.cls_id, self.sep_id, self.pad_id, self.seq_length, self.max_seq_length)

    def __call__(self, inputs) -> dict:
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if len(segments) > 2:
            raise ValueError("the LiteRT export packs one or two segments")
        rank, outer = segments[0].shape.rank, tf.shape(segments[0])
        packed = self.pack([self.tokenizer.tokenize(s) for s in segments])
        if rank == 2:
            return {k: tf.reshape(v, tf.concat([outer, [-1]], 0)) for k, v in packed.items()}
        return packed
