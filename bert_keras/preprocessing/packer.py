"""Segments of token ids -> the encoder's inputs: [CLS] a [SEP] (b [SEP] …), padded, with mask and types.

Truncation keeps the total within the length: `longest_first` is google-research's `_truncate_seq_pair`
(drop the last token of the longest segment, the later one on ties) and `round_robin` gives segments one token
each in turn. The two always agree (checked exhaustively in the tests), so both names run TF.Text's
RoundRobinTrimmer. (HF tokenizers' "longest_first" differs from google-research's when both segments must be
cut to an odd budget: it gives the extra token to the longer input, google's to the first segment.) Length: a fixed `seq_length` (TPUs need static shapes), or None to pad to the longest
sequence of the batch rounded up to a multiple of 8 (at most `max_seq_length`).

Shapes: segments, each RaggedTensor [B, (tokens)] -> dict of int32 [B, L]:
input_word_ids, input_mask (1 for tokens), input_type_ids (segment index, 0 for padding).
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

TRUNCATIONS = ("round_robin", "longest_first")


def pack_segments(segments, cls_id: int, sep_id: int, seq_length: int | None = None,
                  max_seq_length: int = 512, truncation: str = "round_robin", pad_id: int = 0) -> dict:
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    length = seq_length or max_seq_length
    budget = length - len(segments) - 1                        # room left after [CLS] and one [SEP] each
    if budget < 0:
        raise ValueError(f"seq_length {length} is shorter than the {len(segments) + 1} special tokens "
                         f"([CLS] and a [SEP] per segment) of {len(segments)} segment(s)")
    segments = [tf.cast(s, tf.int32).with_row_splits_dtype(tf.int64) for s in segments]
    trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
    ids, types = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
    if seq_length is None:                                     # pad to the batch's longest, a multiple of 8
        longest = tf.cast(tf.reduce_max(tf.concat([ids.row_lengths(), [1]], 0)), tf.int32)
        length = tf.minimum((longest + 7) // 8 * 8, max_seq_length)
    shape = tf.stack([ids.nrows(out_type=tf.int32), length])
    word_ids = ids.to_tensor(default_value=pad_id, shape=shape)
    mask = tf.ones_like(ids, dtype=tf.int32).to_tensor(default_value=0, shape=shape)
    type_ids = tf.cast(types, tf.int32).to_tensor(default_value=0, shape=shape)
    return {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": mask, "input_type_ids": type_ids}
