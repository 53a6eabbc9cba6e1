"""Packed pretraining records: up to 3 whole instances of google-research's format (records.py) in one row of
max_seq_length tokens, which rows packing.py chooses; built, encoded, parsed and unpacked in NumPy.

A row's sequences lie back to back from position 0, each exactly as its instance had it ([CLS] A [SEP] B [SEP],
masked tokens included), then padding. Features (all fixed length; int64 unless noted; S = max_seq_length,
K = max_sequences_per_row = 3, M = packed_prediction_slots(S, max_predictions_per_seq, masked_lm_prob)):
  input_ids, segment_ids          [S]  the sequences' own values back to back, 0-padded
  input_mask                      [S]  1 at the sequences' tokens, 0 at padding (as unpacked)
  packed_sequence_ids             [S]  1..k: which of the row's k sequences a token is in; 0 at padding. Attention
                                       stays within a sequence: token i sees j iff both ids are equal and > 0
  position_ids                    [S]  0, 1, ... restarting at each sequence's [CLS]; 0 at padding
  masked_lm_positions, masked_lm_ids  [M]  every sequence's prediction slots, sequence after sequence, positions
                                       shifted to the row (so ascending); then 0
  masked_lm_weights               [M]  float32: 1.0 for those slots, 0.0 padding
  next_sentence_labels            [K]  each sequence's NSP label (1 = B is a random next sentence); 0 if absent
  cls_positions                   [K]  where each sequence's [CLS] is (its first token); 0 if absent
  next_sentence_weights           [K]  float32: 1.0 for the row's sequences, 0.0 for absent ones
The names follow google-research's where the meaning is the same; packed_sequence_ids is Graphcore's per-token
sequence index ("packed_input_mask" in their MLPerf BERT) and cls_positions / next_sentence_weights NVIDIA's
MLPerf next_sentence_positions / weights. M slots hold every prediction of every row: M is the most predictions
any row of up to K sequences in S tokens can have under the masking rules (78 at 512 with 80 a sequence and
p = 0.15, as Graphcore's MLPerf 76 + 2; not K x 80 = 240, whose empty slots cost the MLM head as much as the
packing saves), and pack_instances raises rather than drop one. A reader takes M from the records themselves
(records.packed_record_slots: the first row's masked_lm_positions length). The loss over a batch of
packed rows is the unpacked one if it is the weighted mean over all MLM slots and NSP is averaged over
next_sentence_weights (sequences, not rows).
"""

from __future__ import annotations

import functools

import numpy as np

from bert_keras.pretraining.packing import MAX_SEQUENCES_PER_ROW, lay_out_rows
from bert_keras.pretraining.records import feature_spec

INSTANCE_FEATURES = tuple(feature_spec(1, 1))       # google-research's names, in its order


@functools.lru_cache(maxsize=None)
def packed_prediction_slots(max_seq_length: int, max_predictions_per_seq: int, masked_lm_prob: float = 0.15,
                            max_sequences_per_row: int = MAX_SEQUENCES_PER_ROW) -> int:
    """MLM slots a packed row needs: the most predictions any row of up to `max_sequences_per_row` sequences
    totalling at most `max_seq_length` tokens can hold, under either masking rule that fills rows.

    Derivation. A sequence of l tokens ([CLS] and [SEP]s included) gets at most f(l) predictions:
      - google-research's instances (instances.py, `pretraining-data`; whole-word masking included, which skips
        a word that would overflow the count, so never exceeds it): f(l) = min(P, max(1, rint(l * p))), rint
        rounding half to even as NumPy's and Python's round (P = max_predictions_per_seq, p = masked_lm_prob);
      - dynamic masking (`pretrain --text`, TF.Text's RandomItemSelector on the l - 2 tokens other than [CLS]
        and [SEP], then cut to P): f(l) = min(P, ceil(float32(l - 2) * float32(p))), in float32 as TF computes it.
    f is non-decreasing, so a row's bound is max f(l1) + f(l2) + f(l3) over l1 + l2 + l3 = S with each li >= 0
    (0: no sequence, f = 0; li >= 1 otherwise), computed exactly per rule by max-plus convolution, and the
    larger of the two rules is returned. Roughly S * p + 1.5 for the first rule (each rint adds at most 0.5, and
    a tiny sequence costs 1 slot for ~0 tokens): 78 at 512 with p = 0.15, P = 80 (Graphcore's MLPerf 76 + 2),
    21 at 128 with P = 20 (instead of 3 x P = 240 and 60). pack_instances raises if a row ever holds more.

    Args:
        max_seq_length: int. S, tokens per row.
        max_predictions_per_seq: int. P, the instances' prediction slots.
        masked_lm_prob: float. p, the share of tokens masked.
        max_sequences_per_row: int. Sequences a row holds at most.

    Returns:
        int: slots per row, at most max_sequences_per_row * P.

    Example:
        >>> packed_prediction_slots(512, 80, 0.15), packed_prediction_slots(128, 20, 0.15)
        (78, 21)
    """
    s, cap = int(max_seq_length), int(max_predictions_per_seq)
    length = np.arange(s + 1)
    static = np.minimum(cap, np.maximum(1, np.rint(length * masked_lm_prob))).astype(np.int64)
    selectable = np.maximum(length - 2, 0).astype(np.float32)
    dynamic = np.minimum(cap, np.ceil(selectable * np.float32(masked_lm_prob))).astype(np.int64)
    best = 0
    for f in (static, dynamic):
        f = np.where(length > 0, f, 0)
        total = f.copy()                                   # the most predictions of 1 sequence in t tokens
        for _ in range(max_sequences_per_row - 1):          # ... of up to k sequences: max-plus with f
            total = np.array([(f[:t + 1] + total[t::-1]).max() for t in range(s + 1)])
        best = max(best, int(total[s]))
    return best


def packed_feature_spec(max_seq_length: int, slots: int,
                        max_sequences_per_row: int = MAX_SEQUENCES_PER_ROW) -> dict:
    """The packed records' features for tf.io.parse_example / parse_single_example (module docstring).

    Args:
        max_seq_length: int. Tokens per row (the instances' max_seq_length).
        slots: int. MLM slots a row (packed_prediction_slots when written; records.packed_record_slots reads
            them back from a file).
        max_sequences_per_row: int. Sequences a row holds at most.

    Returns:
        {name: tf.io.FixedLenFeature}.

    Example:
        >>> spec = packed_feature_spec(128, packed_prediction_slots(128, 20, 0.15))
        >>> spec["masked_lm_ids"].shape, spec["cls_positions"].shape
        ([21], [3])
    """
    import tensorflow as tf
    seq, slots, per_sequence = [max_seq_length], [slots], [max_sequences_per_row]
    spec = {name: tf.io.FixedLenFeature(seq, tf.int64) for name in
            ("input_ids", "input_mask", "segment_ids", "packed_sequence_ids", "position_ids")}
    spec.update({"masked_lm_positions": tf.io.FixedLenFeature(slots, tf.int64),
                 "masked_lm_ids": tf.io.FixedLenFeature(slots, tf.int64),
                 "masked_lm_weights": tf.io.FixedLenFeature(slots, tf.float32),
                 "next_sentence_labels": tf.io.FixedLenFeature(per_sequence, tf.int64),
                 "cls_positions": tf.io.FixedLenFeature(per_sequence, tf.int64),
                 "next_sentence_weights": tf.io.FixedLenFeature(per_sequence, tf.float32)})
    return spec


def pack_instances(features: dict, rows: np.ndarray, slots: int) -> dict:
    """google-research's instances -> packed rows, each holding the instances `rows` names (packing.pack_lengths).

    Args:
        features: {name: [N, k] array}: the instances' input_ids, input_mask, segment_ids [N, S],
            masked_lm_positions, masked_lm_ids, masked_lm_weights [N, P], next_sentence_labels [N, 1]
            (instances.mask_instances' output, or records parsed with records.feature_spec).
        rows: [R, K] int: each row's instances as indices into `features`, then -1; a row's sequences must fit
            in S tokens.
        slots: int. M, MLM slots a row (packed_prediction_slots); a row with more predictions is a ValueError.

    Returns:
        {name: [R, k] array}: the packed features (module docstring; int32 or int64 as the instances', weights
        float32), ready for records.tfrecord_frames or encode_packed_examples.

    Example:
        >>> rows = pack_lengths(features["input_mask"].sum(1), 128)                     # doctest: +SKIP
        >>> packed = pack_instances(features, rows, packed_prediction_slots(128, 20, 0.15))  # doctest: +SKIP
    """
    p = np.asarray(features["masked_lm_positions"]).shape[1]
    rows = np.asarray(rows, np.int64)
    if rows.ndim != 2 or not 1 <= rows.shape[1] <= MAX_SEQUENCES_PER_ROW:
        raise ValueError(f"rows must be [R, 1..{MAX_SEQUENCES_PER_ROW}] instance indices, got shape {rows.shape}")
    r, k = rows.shape
    present = rows >= 0
    source = np.where(present, rows, 0)
    lengths = np.asarray(features["input_mask"]).astype(bool).sum(1)
    laid = lay_out_rows({name: features[name] for name in ("input_ids", "segment_ids")}, lengths, rows,
                        what="instances")
    offset = laid["cls_positions"]                                        # [R, K] where each sequence starts
    mask_dtype = np.asarray(features["input_mask"]).dtype
    packed = {name: laid[name] for name in ("input_ids", "segment_ids")}
    packed["input_mask"] = laid["real"].astype(mask_dtype)
    packed["packed_sequence_ids"] = laid["packed_sequence_ids"].astype(mask_dtype)
    packed["position_ids"] = laid["position_ids"].astype(mask_dtype)
    # Prediction slots: each sequence's [P] slots shifted by its offset, [R, K * P]; the real ones (weight > 0)
    # moved to the front in order (a stable sort on "not real").
    weights = np.where(present[:, :, None], np.asarray(features["masked_lm_weights"])[source], 0)
    width = max(k * p, slots)                                             # every row exactly `slots` wide
    chosen = np.pad((weights != 0).reshape(r, k * p), ((0, 0), (0, width - k * p)))
    if chosen.sum(1).max(initial=0) > slots:
        raise ValueError(f"a packed row holds {chosen.sum(1).max()} MLM predictions, more than its {slots} slots "
                         "(packed_prediction_slots: give the max_predictions_per_seq and masked_lm_prob the "
                         "instances were masked with)")
    order = np.argsort(~chosen, axis=1, kind="stable")[:, :slots]
    kept = np.take_along_axis(chosen, order, 1)
    positions = np.asarray(features["masked_lm_positions"])[source] + offset[:, :, None]
    for name, values in (("masked_lm_positions", positions),
                         ("masked_lm_ids", np.asarray(features["masked_lm_ids"])[source]),
                         ("masked_lm_weights", weights)):
        values = np.take_along_axis(np.pad(values.reshape(r, k * p), ((0, 0), (0, width - k * p))), order, 1)
        packed[name] = np.where(kept, values, 0).astype(np.asarray(features[name]).dtype)
    labels = np.asarray(features["next_sentence_labels"])
    packed["next_sentence_labels"] = np.where(present, labels[source, 0], 0).astype(labels.dtype)
    packed["cls_positions"] = offset.astype(np.int64)
    packed["next_sentence_weights"] = present.astype(np.float32)
    return packed


def unpack_rows(packed: dict, max_predictions_per_seq: int) -> dict:
    """Packed rows -> the instances they hold, in google-research's format: the inverse of pack_instances.

    Args:
        packed: {name: [R, k] array}: packed features (pack_instances' output, or parsed records).
        max_predictions_per_seq: int. The instances' prediction slots.

    Returns:
        {name: [N, k] array} as records.feature_spec describes: the rows' sequences, row after row, in their
        order in the row (for rows from pack_lengths: the instances rows[rows >= 0]).

    Example:
        >>> instances = unpack_rows(pack_instances(features, rows), 20)                 # doctest: +SKIP
    """
    sequence_ids = np.asarray(packed["packed_sequence_ids"])
    r, s = sequence_ids.shape
    present = np.asarray(packed["next_sentence_weights"]) > 0                          # [R, K]
    row, j = np.nonzero(present)                                                       # one per instance
    start = np.asarray(packed["cls_positions"])[row, j]
    length = (sequence_ids[row] == j[:, None] + 1).sum(1)
    column = np.arange(s)
    real = column < length[:, None]                                                    # [N, S]
    at = np.where(real, start[:, None] + column, 0)
    instances = {name: np.where(real, np.asarray(packed[name])[row[:, None], at], 0)
                 for name in ("input_ids", "segment_ids")}
    instances["input_mask"] = real.astype(np.asarray(packed["input_mask"]).dtype)
    # Each prediction slot belongs to the sequence its position is in; an instance's slots keep their order.
    weights = np.asarray(packed["masked_lm_weights"])
    slot_positions = np.asarray(packed["masked_lm_positions"])
    owner = np.take_along_axis(sequence_ids, slot_positions.astype(np.int64), 1)       # [R, M]
    mine = (weights[row] != 0) & (owner[row] == j[:, None] + 1)                       # [N, M]
    order = np.argsort(~mine, axis=1, kind="stable")[:, :max_predictions_per_seq]
    kept = np.take_along_axis(mine, order, 1)
    if (mine.sum(1) > max_predictions_per_seq).any():
        raise ValueError(f"a packed sequence has {mine.sum(1).max()} predictions, more than "
                         f"max_predictions_per_seq {max_predictions_per_seq}")
    missing = max_predictions_per_seq - order.shape[1]       # rows with fewer slots than an instance has (78 < 80)
    for name, shift in (("masked_lm_positions", start[:, None]), ("masked_lm_ids", 0), ("masked_lm_weights", 0)):
        values = np.take_along_axis(np.asarray(packed[name])[row], order, 1) - shift
        values = np.where(kept, values, 0).astype(np.asarray(packed[name]).dtype)
        instances[name] = np.pad(values, ((0, 0), (0, missing))) if missing > 0 else values
    labels = np.asarray(packed["next_sentence_labels"])
    instances["next_sentence_labels"] = labels[row, j][:, None]
    return {name: instances[name] for name in INSTANCE_FEATURES}


def encode_packed_examples(packed: dict) -> list[bytes]:
    """Packed rows -> one serialized tf.train.Example each (the bytes protobuf's deterministic serializer
    writes; records.tfrecord_frames frames them for a file).

    Args:
        packed: {name: [R, k] array}, pack_instances' output.

    Returns:
        [R] bytes.

    Example:
        >>> examples = encode_packed_examples(pack_instances(features, rows))          # doctest: +SKIP
    """
    from bert_keras.pretraining.example_proto import encode_examples
    data, ends = encode_examples({name: _typed(name, values) for name, values in packed.items()})
    data, ends = data.tobytes(), ends.tolist()
    return [data[a:b] for a, b in zip([0] + ends[:-1], ends)]


def parse_packed_examples(serialized, max_seq_length: int, slots: int,
                          max_sequences_per_row: int = MAX_SEQUENCES_PER_ROW) -> dict:
    """Serialized packed tf.train.Examples [R] -> {name: [R, k] tensor} (tf.io.parse_example with
    packed_feature_spec; in a tf.data map, on batches).

    Args:
        serialized: [R] string tensor or list of bytes.
        max_seq_length, slots, max_sequences_per_row: as the records were written with (slots:
            packed_prediction_slots' value, or records.packed_record_slots of the file).

    Returns:
        {name: tf.Tensor [R, k]}, int64 or float32.

    Example:
        >>> parse_packed_examples(encode_packed_examples(packed), 128, 21)             # doctest: +SKIP
    """
    import tensorflow as tf
    return tf.io.parse_example(serialized, packed_feature_spec(max_seq_length, slots, max_sequences_per_row))


PACK_WINDOW = 16384         # instances packed together (a shard's, in key order): ~99.5% of the limit on
                            # Wikipedia-512 lengths, and ~40 MB of records at 512 held at a time
PACK_ROWS = 1024            # rows built and encoded at a time


def pack_record_frames(frames, max_seq_length: int, max_predictions_per_seq: int, masked_lm_prob: float,
                       window: int = PACK_WINDOW):
    """Framed TFRecords of instances, in order -> framed TFRecords of packed rows (`pretraining-data --pack`).

    Each run of `window` consecutive instances (the last one shorter) is packed on its own by
    packing.pack_lengths, so the rows are a function of the instances and their order alone, whichever back end
    writes them, and memory follows `window`, not the shard.

    Args:
        frames: iterable of bytes: TFRecord frames (length, its CRC, a serialized tf.train.Example with
            records.feature_spec's features, its CRC), as keyed.merge_records yields them.
        max_seq_length, max_predictions_per_seq: the instances' lengths.
        masked_lm_prob: float. The instances' masking rate (the rows' slots: packed_prediction_slots).
        window: instances packed together.

    Returns:
        A generator of bytes: each packed row's TFRecord frame (module docstring's features).

    Example:
        >>> write_shard(path, pack_record_frames(merge_records(streams), 128, 20, 0.15))  # doctest: +SKIP
    """
    import tensorflow as tf
    from bert_keras.pretraining.packing import pack_lengths
    from bert_keras.pretraining.records import tfrecord_frames
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    slots = packed_prediction_slots(max_seq_length, max_predictions_per_seq, masked_lm_prob)

    def windows():
        batch = []
        for frame in frames:
            batch.append(bytes(frame[12:-4]))                              # the Example between the headers
            if len(batch) == window:
                yield batch
                batch = []
        if batch:
            yield batch

    for examples in windows():
        lengths = np.concatenate([tf.io.parse_example(examples[i:i + PACK_ROWS], {"input_mask": spec["input_mask"]})
                                  ["input_mask"].numpy().sum(1) for i in range(0, len(examples), PACK_ROWS)])
        rows = pack_lengths(lengths, max_seq_length)
        for first in range(0, len(rows), PACK_ROWS):
            part = rows[first:first + PACK_ROWS]
            used = part[part >= 0]
            parsed = tf.io.parse_example([examples[i] for i in used], spec)
            features = {name: value.numpy().astype(np.int32) if value.dtype == tf.int64 else value.numpy()
                        for name, value in parsed.items()}
            local = np.full(part.shape, -1, np.int64)
            local[part >= 0] = np.arange(len(used))
            data, ends = tfrecord_frames(pack_instances(features, local, slots))
            data, ends = data.tobytes(), ends.tolist()
            yield from (data[a:b] for a, b in zip([0] + ends[:-1], ends))


def shard_frames(plan, frames, pack: bool):
    """A shard's frames in key order as written: as they are, or packed (pack_record_frames) with the plan's
    lengths. Both back ends (local.py, beam.py) write a shard through this."""
    if not pack:
        return frames
    return pack_record_frames(frames, plan.config.max_seq_length, plan.config.max_predictions_per_seq,
                              plan.config.masked_lm_prob)


def _typed(name: str, values) -> np.ndarray:
    """float32 for the weights (float_list), integers otherwise (int64_list)."""
    values = np.asarray(values)
    return values.astype(np.float32) if name.endswith("_weights") else values
