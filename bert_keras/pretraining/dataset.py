"""tf.data pipelines that feed BertPretrainer.fit: static records (google-research's files) or dynamic masking.

Both yield (x, y) with static shapes (TPUs):
  x: input_word_ids, input_mask, input_type_ids [B, S] int32; masked_lm_positions [B, P] int32
  y: masked_lm_ids [B, P] int32, masked_lm_weights [B, P] float32, next_sentence_labels [B] int32 (MLM+NSP only)
Packed records (`packed=True`, pretraining-data --pack): B rows of up to K = 3 sequences, P = `slots`
(packed_records.packed_prediction_slots, as written; `slots=None`: records.packed_record_slots reads it from
the files), x adds position_ids, packed_sequence_ids [B, S] and cls_positions [B, K], and NSP is per sequence:
next_sentence_labels and next_sentence_weights [B, K] (model_batch).
Which records batch n holds is a function of (seed, n) alone (reading_order.py): `first_batch=n` starts there
at once, reading none of the batches before it, so a resumed run trains on exactly what an uninterrupted run
would. `shard=(i, n)`: the i-th of n disjoint parts (every n-th segment of 256 records), for one of n input
pipelines (training/input_pipelines.py). `index_cache`: where the files' segment index is kept (.npz).
`segment_records`: records per segment (reading_order.SEGMENT; smaller: finer reading order, a larger index).
"""

from __future__ import annotations

import tensorflow as tf

from bert_keras.pretraining.packed_records import packed_feature_spec
from bert_keras.pretraining.reading_order import SEGMENT, index_files, record_stream
from bert_keras.pretraining.records import feature_spec

PACK_TEXT_WINDOW = 1024     # lines packed together by `pretrain --text --pack`


def records_dataset(files: list[str], batch_size: int, max_seq_length: int, max_predictions_per_seq: int,
                    training: bool = True, seed: int = 0, first_batch: int = 0, nsp: bool = True,
                    shuffle_buffer: int = 10_000, shard: tuple[int, int] = (0, 1),
                    index_cache: str | None = None, segment_records: int = SEGMENT,
                    packed: bool = False, slots: int | None = None) -> tf.data.Dataset:
    if packed and not slots:
        from bert_keras.pretraining.records import packed_record_slots
        slots = packed_record_slots(files)              # as pretraining-data --pack wrote them
    spec = packed_feature_spec(max_seq_length, slots) if packed else feature_spec(max_seq_length,
                                                                                  max_predictions_per_seq)

    def parse(records):
        return model_batch(tf.io.parse_example(records, spec), nsp)

    ds = _stream(files, "tfrecord", batch_size, first_batch, training, seed, shuffle_buffer, shard, index_cache,
                 segment_records)
    ds = ds.batch(batch_size, drop_remainder=training).map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                                           deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def model_batch(features: dict, nsp: bool = True) -> tuple[dict, dict]:
    """Parsed pretraining records (a batch; google-research's names, records.feature_spec, or packed rows',
    packed_records.packed_feature_spec) -> (x, y) as BertPretrainer.fit takes them, int32 and float32 weights.

    Args:
        features: {name: [B, k] tensor or array}.
        nsp: bool. Include the next-sentence targets (False: MLM only).

    Returns:
        (x, y): the module docstring's; packed rows add to x "position_ids", "packed_sequence_ids" [B, S] and
        "cls_positions" [B, K], and y's next-sentence targets are "next_sentence_labels" and
        "next_sentence_weights" [B, K] (one per sequence).

    Example:
        >>> x, y = model_batch(tf.io.parse_example(serialized, feature_spec(128, 20)))     # doctest: +SKIP
    """
    f = {k: tf.cast(v, tf.float32 if k.endswith("_weights") else tf.int32) for k, v in features.items()}
    x = {"input_word_ids": f["input_ids"], "input_mask": f["input_mask"], "input_type_ids": f["segment_ids"],
         "masked_lm_positions": f["masked_lm_positions"]}
    y = {"masked_lm_ids": f["masked_lm_ids"], "masked_lm_weights": f["masked_lm_weights"]}
    if "packed_sequence_ids" in f:
        x.update({k: f[k] for k in ("position_ids", "packed_sequence_ids", "cls_positions")})
        if nsp:
            y.update({k: f[k] for k in ("next_sentence_labels", "next_sentence_weights")})
    elif nsp:
        y["next_sentence_labels"] = f["next_sentence_labels"][:, 0]
    return x, y


def dynamic_masking_dataset(files: list[str], preprocessor, batch_size: int, max_seq_length: int = 128,
                            max_predictions_per_seq: int = 20, masked_lm_prob: float = 0.15, seed: int = 0,
                            first_batch: int = 0, shard: tuple[int, int] = (0, 1),
                            index_cache: str | None = None, segment_records: int = SEGMENT,
                            pack: bool = False, pack_window: int = PACK_TEXT_WINDOW) -> tf.data.Dataset:
    """MLM-only (RoBERTa-style) batches from plain text, masked afresh each time a line comes round: TF.Text's
    RandomItemSelector picks `masked_lm_prob` of the real tokens (never [CLS]/[SEP]/[PAD], at most
    `max_predictions_per_seq`), MaskValuesChooser makes them [MASK] 80%, random 10%, unchanged 10%.
    Each non-empty line is one sequence: [CLS] tokens [SEP], cut to max_seq_length. The lines of batch n are
    fixed by (seed, n) as for records; the masks are drawn by TF.Text's samplers from the op seeds, so after a
    resume they are fresh draws, not the uninterrupted run's.

    `pack` (`pretrain --text --pack`): rows filled on the fly. The lines are masked `pack_window` at a time, each
    sequence as unpacked, and each window's sequences packed into rows of up to 3 by the records' packer
    (packing.pack_lengths, packed_records.pack_instances: deterministic, a function of the window's lengths in
    order); the rows are then batched `batch_size` at a time, so every batch has static shapes
    ([batch_size, max_seq_length], packed_records.packed_prediction_slots MLM slots) and model_batch's packed
    names (x adds position_ids, packed_sequence_ids, cls_positions; MLM only). A window's rows do not fill whole
    batches, so which rows batch n holds depends on the windows before it: a resumed packed run packs the lines
    from the start again and skips the `first_batch` batches already trained on (tokenizing and packing, not training;
    the rows are the uninterrupted run's, the masks fresh draws)."""
    import tensorflow_text as text
    vocab = list(preprocessor.vocab)
    cls_id, sep_id, mask_id = (vocab.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    pad_id = vocab.index("[PAD]") if "[PAD]" in vocab else 0
    lines_per_batch = pack_window if pack else batch_size
    selector = text.RandomItemSelector(max_selections_per_batch=max_predictions_per_seq * lines_per_batch,
                                       selection_rate=masked_lm_prob, unselectable_ids=[cls_id, sep_id, pad_id])
    chooser = text.MaskValuesChooser(len(vocab), mask_id, mask_token_rate=0.8, random_token_rate=0.1)

    def mask(lines):
        ids = preprocessor.tokenize(lines)[:, :max_seq_length - 2]
        ids, segments = text.combine_segments([ids], cls_id, sep_id)
        masked, positions, labels = text.mask_language_model(ids, selector, chooser)
        positions, labels = positions[:, :max_predictions_per_seq], labels[:, :max_predictions_per_seq]
        word_ids, input_mask = text.pad_model_inputs(masked, max_seq_length, pad_value=pad_id)
        type_ids, _ = text.pad_model_inputs(segments, max_seq_length)
        positions, weights = text.pad_model_inputs(positions, max_predictions_per_seq)
        labels, _ = text.pad_model_inputs(labels, max_predictions_per_seq)
        x = {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": tf.cast(input_mask, tf.int32),
             "input_type_ids": tf.cast(type_ids, tf.int32), "masked_lm_positions": tf.cast(positions, tf.int32)}
        return x, {"masked_lm_ids": tf.cast(labels, tf.int32), "masked_lm_weights": tf.cast(weights, tf.float32)}

    if not pack:
        ds = _stream(files, "text", batch_size, first_batch, True, seed, 10_000, shard, index_cache,
                     segment_records)
        ds = ds.map(tf.strings.strip).batch(batch_size, drop_remainder=True).map(mask)
        return ds.prefetch(tf.data.AUTOTUNE)
    ds = _stream(files, "text", batch_size, 0, True, seed, 10_000, shard, index_cache, segment_records)
    ds = ds.map(tf.strings.strip).batch(pack_window, drop_remainder=True).map(mask)
    ds = ds.map(lambda x, y: pack_masked_batch(x, y, max_seq_length, max_predictions_per_seq, masked_lm_prob))
    ds = ds.unbatch().batch(batch_size, drop_remainder=True).skip(first_batch)
    return ds.prefetch(tf.data.AUTOTUNE)


def pack_masked_batch(x: dict, y: dict, max_seq_length: int, max_predictions_per_seq: int,
                      masked_lm_prob: float = 0.15) -> tuple[dict, dict]:
    """A batch of masked sequences (dynamic_masking_dataset's unpacked (x, y)) -> the same sequences packed into
    rows of up to 3 (packing.pack_lengths, packed_records.pack_instances, in a tf.numpy_function), as model_batch
    names packed rows, MLM only; the number of rows R depends on the lengths.

    Args:
        x: {input_word_ids, input_mask, input_type_ids [N, S], masked_lm_positions [N, P]} tensors.
        y: {masked_lm_ids [N, P] int32, masked_lm_weights [N, P] float32}.
        max_seq_length: S; max_predictions_per_seq: P; masked_lm_prob: the masking rate (the rows' M slots:
            packed_records.packed_prediction_slots(S, P, masked_lm_prob)).

    Returns:
        (x, y): x adds position_ids, packed_sequence_ids [R, S] and cls_positions [R, 3]; masked_lm_positions,
        masked_lm_ids, masked_lm_weights are [R, M].

    Example:
        >>> x, y = pack_masked_batch(x, y, 128, 20)                                     # doctest: +SKIP
    """
    import numpy as np

    from bert_keras.pretraining.packed_records import pack_instances, packed_prediction_slots
    from bert_keras.pretraining.packing import MAX_SEQUENCES_PER_ROW, pack_lengths
    slots = packed_prediction_slots(max_seq_length, max_predictions_per_seq, masked_lm_prob)
    names = ("input_ids", "input_mask", "segment_ids", "packed_sequence_ids", "position_ids", "masked_lm_positions",
             "masked_lm_ids", "masked_lm_weights", "cls_positions")

    def pack(ids, input_mask, segments, positions, labels, weights):
        features = {"input_ids": ids, "input_mask": input_mask, "segment_ids": segments,
                    "masked_lm_positions": positions, "masked_lm_ids": labels, "masked_lm_weights": weights,
                    "next_sentence_labels": np.zeros((len(ids), 1), np.int32)}
        packed = pack_instances(features, pack_lengths(input_mask.sum(1), max_seq_length), slots)
        return [packed[name].astype(np.float32 if name.endswith("_weights") else np.int32) for name in names]

    outputs = tf.numpy_function(pack, [x["input_word_ids"], x["input_mask"], x["input_type_ids"],
                                       x["masked_lm_positions"], y["masked_lm_ids"], y["masked_lm_weights"]],
                                [tf.float32 if name.endswith("_weights") else tf.int32 for name in names],
                                stateful=False)
    widths = {"masked_lm_positions": slots, "masked_lm_ids": slots, "masked_lm_weights": slots,
              "cls_positions": MAX_SEQUENCES_PER_ROW}
    for name, value in zip(names, outputs):
        value.set_shape([None, widths.get(name, max_seq_length)])
    return model_batch(dict(zip(names, outputs)), nsp=False)


def _stream(files, kind, batch_size, first_batch, training, seed, shuffle_buffer, shard, index_cache,
            segment_records):
    """The records of one pipeline from batch `first_batch` on; groups of ~`shuffle_buffer` records shuffled."""
    segments = index_files(files, kind, index_cache, segment_records)
    window = max(1, -(-shuffle_buffer // segment_records))
    return record_stream(segments, seed, shard[0], shard[1], window, training, first_record=first_batch * batch_size)
