"""Segments of token ids -> the encoder's inputs: [CLS] a [SEP] (b [SEP] …), padded, with mask and types.

Truncation keeps the total within the length: `longest_first` is google-research's `_truncate_seq_pair`
(drop the last token of the longest segment, the later one on ties) and `round_robin` gives segments one token
each in turn (TF.Text's RoundRobinTrimmer). The two always end in the same lengths (checked exhaustively in
the tests): both leave every segment at min(length, t) for the largest t that fits, and hand the tokens left
over, one each, to the earliest segments longer than t. So both names run that closed form, computed per row
on dense [B, segments] tensors. (HF tokenizers' "longest_first" differs from google-research's when both
segments must be cut to an odd budget: it gives the extra token to the longer input, google's to the first
segment.) Length: a fixed `seq_length` (TPUs need static shapes; a Python int, or a scalar int tensor when
the length is chosen at call time, as TF Hub's bert_pack_inputs(..., seq_length=N) does), or None to pad to the
longest sequence of the batch rounded up to a multiple of 8 (at most `max_seq_length`).

Why not TF.Text's RoundRobinTrimmer + combine_segments: they are exact but their RaggedTensor shape checks
add ~400 graph nodes, and in tf.data the graph runs once per batch. Here one RaggedRange lists, for every
output token, where it comes from ([CLS], a kept token of a segment, [SEP]), so the work is proportional to
the tokens, and RaggedTensorToTensor pads once. One segment (most batches) takes a shorter path, _pack_one: ~15
ops instead of ~40 (benchmarks/benchmark_tokenizer.py measures tokenize + pack against HF tokenizers).

Shapes: segments, each RaggedTensor [B, (tokens)] (or [B, (words), (pieces)], read as its pieces) -> dict of
int32 [B, L]:
input_word_ids, input_mask (1 for tokens), input_type_ids (segment index, 0 for padding).
"""

from __future__ import annotations

import tensorflow as tf

TRUNCATIONS = ("round_robin", "longest_first")


def kept_lengths(lengths, budget: int):
    """Segment lengths [B, K] (int64) -> lengths after truncation to a total of `budget` tokens per row [B, K]."""
    k = lengths.shape[1]
    if k == 1:
        return tf.minimum(lengths, budget)
    ordered = tf.sort(lengths, axis=1)
    before = tf.cumsum(ordered, axis=1, exclusive=True)
    # The first n sorted segments fit whole when each later one is cut to the length of the n-th.
    fits = before + tf.range(k, 0, -1, dtype=tf.int64) * ordered <= budget                    # [B, K]
    n = tf.reduce_sum(tf.cast(fits, tf.int64), axis=1, keepdims=True)                        # [B, 1]
    n_clipped = tf.minimum(n, k - 1)
    cut = (budget - tf.gather(before, n_clipped, batch_dims=1)) // tf.maximum(k - n, 1)      # the level t
    cut = tf.where(n >= k, tf.reduce_max(lengths, axis=1, keepdims=True), cut)               # nothing to cut
    base = tf.minimum(lengths, cut)
    left = budget - tf.reduce_sum(base, axis=1, keepdims=True)
    longer = lengths > cut
    rank = tf.cumsum(tf.cast(longer, tf.int64), axis=1, exclusive=True)
    return base + tf.cast(longer & (rank < left), tf.int64)


def _token_splits(segment):
    """Row splits [B + 1] into the segment's flat tokens, for [B, (tokens)] or [B, (words), (pieces)] (each row
    from its first word's first piece to its last word's last piece)."""
    splits = tf.cast(segment.row_splits, tf.int64)
    for inner in segment.nested_row_splits[1:]:
        splits = tf.gather(tf.cast(inner, tf.int64), splits)
    return splits


def pack_segments(segments, cls_id: int, sep_id: int, seq_length: int | None = None,
                  max_seq_length: int = 512, truncation: str = "round_robin", pad_id: int = 0) -> dict:
    """Token-id segments [B, (tokens)] -> the id dict [B, L] (see the module docstring for lengths and truncation).

    Args:
        segments: list of RaggedTensors [B, (tokens)] int32 (or [B, (words), (pieces)]), one per segment.
        cls_id, sep_id: the vocabulary's [CLS] and [SEP] ids.
        seq_length: int, scalar int tensor or None. A fixed L; None pads to the batch's longest, rounded up to 8.
        max_seq_length: int. The longest L when `seq_length` is None.
        truncation: "round_robin" or "longest_first" (the same lengths; see the module docstring).
        pad_id: the [PAD] id.

    Raises:
        ValueError: an unknown truncation, or a fixed length too short for [CLS] and one [SEP] per segment.
    """
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    k = len(segments)
    if tf.is_tensor(seq_length):                               # a scalar chosen at call time (TF Hub's API)
        length = tf.cast(seq_length, tf.int64)
        # A plain Assert op (string data: no cond guard around it).
        check = tf.debugging.Assert(length >= k + 1, [
            "seq_length", tf.strings.as_string(length),
            f"is shorter than the {k + 1} special tokens ([CLS] and a [SEP] per segment) of {k} segment(s)"])
        with tf.control_dependencies([check]):
            budget = length - k - 1
    else:
        length = seq_length or max_seq_length
        budget = length - k - 1                                # room left after [CLS] and one [SEP] each
        if budget < 0:
            raise ValueError(f"seq_length {length} is shorter than the {k + 1} special tokens "
                             f"([CLS] and a [SEP] per segment) of {k} segment(s)")
    splits = [_token_splits(s) for s in segments]
    values = [tf.cast(s.flat_values, tf.int32) for s in segments]
    if k == 1:
        return _pack_one(values[0], splits[0], cls_id, sep_id, budget, seq_length, max_seq_length, pad_id)
    sizes = [tf.size(v, out_type=tf.int64) for v in values]
    pool = tf.concat(values + [[cls_id, sep_id]], 0)           # every token of the output comes from here
    cls_at = tf.add_n(sizes) if sizes else tf.constant(0, tf.int64)
    lengths = tf.stack([s[1:] - s[:-1] for s in splits], axis=1)                             # [B, K]
    kept = kept_lengths(lengths, budget)
    # Each row is 2K + 1 runs of the pool: [CLS], the kept head of segment 0, [SEP], segment 1, [SEP], ...
    # One RaggedRange lists the pool index of every output token, in order.
    one = tf.ones_like(kept[:, :1])
    run_starts, run_lengths, base = [one * cls_at], [one], 0
    for i in range(k):
        run_starts += [splits[i][:-1, None] + base, one * (cls_at + 1)]
        run_lengths += [kept[:, i:i + 1], one]
        base += sizes[i]
    run_starts = tf.reshape(tf.concat(run_starts, 1), [-1])                                  # [B * (2K + 1)]
    run_lengths = tf.concat(run_lengths, 1)                                                  # [B, 2K + 1]
    source = tf.ragged.range(run_starts, run_starts + tf.reshape(run_lengths, [-1]))
    total = tf.reduce_sum(run_lengths, axis=1)                                               # [B]
    if seq_length is None:
        length = _batch_length(total, max_seq_length)
    shape = tf.stack([tf.shape(kept, out_type=tf.int64)[0], tf.cast(length, tf.int64)])
    word_ids = tf.RaggedTensor.from_row_splits(tf.gather(pool, source.flat_values),
                                               tf.concat([[0], tf.cumsum(total)], 0), validate=False)
    positions = tf.range(length, dtype=tf.int64)[None, :]                                     # [1, L]
    mask = tf.cast(positions < total[:, None], tf.int32)
    return {"input_word_ids": word_ids.to_tensor(default_value=pad_id, shape=shape), "input_mask": mask,
            "input_type_ids": _token_types(kept, positions, mask)}


def _batch_length(total, max_seq_length: int):
    """Each row's length with its special tokens [B] -> the length to pad to without a fixed seq_length: the
    batch's longest rounded up to a multiple of 8, at most max_seq_length (8 for an empty batch)."""
    longest = tf.reduce_max(tf.concat([total, [1]], 0))
    return tf.minimum((longest + 7) // 8 * 8, max_seq_length)


def _pack_one(values, splits, cls_id, sep_id, budget, seq_length, max_seq_length, pad_id):
    """One segment (flat int32 ids [T], row splits [B + 1]) -> the id dict: [CLS] head [SEP], padded.

    The common case (classification, tagging, every tf.data batch of single sentences) in ~15 ops instead of the
    general path's ~40, since in tf.data each op has a fixed cost per batch however small: RaggedTensorToTensor
    cuts every row to the budget and pads it in one op, one Pad makes room for [CLS] and [SEP], and both are
    added where the padding left zeros."""
    kept = tf.minimum(splits[1:] - splits[:-1], budget)                                        # [B]
    if seq_length is None:
        length = _batch_length(kept + 2, max_seq_length)
        budget = length - 2
    else:
        length = budget + 2
    body = tf.raw_ops.RaggedTensorToTensor(                    # [B, budget], rows cut or padded with 0
        shape=tf.stack([tf.constant(-1, tf.int64), tf.cast(budget, tf.int64)]), values=values,
        default_value=tf.constant(0, tf.int32), row_partition_tensors=[splits], row_partition_types=["ROW_SPLITS"])
    positions = tf.range(length, dtype=tf.int64)[None, :]                                     # [1, L]
    sep_at = kept[:, None] + 1                                                                # [B, 1]
    special = tf.where(positions == sep_at, sep_id, tf.where(positions == 0, cls_id, 0))     # [B, L]
    word_ids = tf.pad(body, [[0, 0], [1, 1]]) + special
    mask = tf.cast(positions <= sep_at, tf.int32)
    if pad_id != 0:
        word_ids = tf.where(mask > 0, word_ids, pad_id)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": tf.zeros_like(mask)}


def _token_types(kept, positions, mask):
    """Kept segment lengths [B, K], positions [1, L] and the mask [B, L] -> input_type_ids int32 [B, L].

    Dense, from the lengths alone (per-token row ids would cost a binary search over every output token):
    segment i's [SEP] sits at position sum(kept[:i + 1] + 1), and a position's type is the number of [SEP]s
    before it; positions past the last [SEP] are padding (mask 0), type 0."""
    k = kept.shape[1]
    if k == 1:                                                 # [CLS] a [SEP] pad...: all 0 (one op, in
        return tf.zeros_like(mask)                             # tf.data each has a fixed cost however small)
    seps = tf.cumsum(kept + 1, axis=1)                                                        # [B, K]
    past = [tf.cast(positions > seps[:, i:i + 1], tf.int32) for i in range(k - 1)]            # K - 1 x [B, L]
    return tf.add_n(past) * mask                               # the mask ends right after the last [SEP]
