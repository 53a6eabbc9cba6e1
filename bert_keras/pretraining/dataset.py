"""tf.data pipelines that feed BertPretrainer.fit: static records (google-research's files) or dynamic masking.

Both yield (x, y) with static shapes (TPUs):
  x: input_word_ids, input_mask, input_type_ids [B, S] int32; masked_lm_positions [B, P] int32
  y: masked_lm_ids [B, P] int32, masked_lm_weights [B, P] float32, next_sentence_labels [B] int32 (MLM+NSP only)
Packed records (`packed=True`, pretraining-data --pack): B rows of up to K = 3 sequences, P = 3 x the
instances' slots, x adds position_ids, packed_sequence_ids [B, S] and cls_positions [B, K], and NSP is per
sequence: next_sentence_labels and next_sentence_weights [B, K] (model_batch).
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


def records_dataset(files: list[str], batch_size: int, max_seq_length: int, max_predictions_per_seq: int,
                    training: bool = True, seed: int = 0, first_batch: int = 0, nsp: bool = True,
                    shuffle_buffer: int = 10_000, shard: tuple[int, int] = (0, 1),
                    index_cache: str | None = None, segment_records: int = SEGMENT,
                    packed: bool = False) -> tf.data.Dataset:
    spec = (packed_feature_spec if packed else feature_spec)(max_seq_length, max_predictions_per_seq)

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
                            index_cache: str | None = None, segment_records: int = SEGMENT) -> tf.data.Dataset:
    """MLM-only (RoBERTa-style) batches from plain text, masked afresh each time a line comes round: TF.Text's
    RandomItemSelector picks `masked_lm_prob` of the real tokens (never [CLS]/[SEP]/[PAD], at most
    `max_predictions_per_seq`), MaskValuesChooser makes them [MASK] 80%, random 10%, unchanged 10%.
    Each non-empty line is one sequence: [CLS] tokens [SEP], cut to max_seq_length. The lines of batch n are
    fixed by (seed, n) as for records; the masks are drawn by TF.Text's samplers from the op seeds, so after a
    resume they are fresh draws, not the uninterrupted run's."""
    import tensorflow_text as text
    vocab = list(preprocessor.vocab)
    cls_id, sep_id, mask_id = (vocab.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    pad_id = vocab.index("[PAD]") if "[PAD]" in vocab else 0
    selector = text.RandomItemSelector(max_selections_per_batch=max_predictions_per_seq * batch_size,
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

    ds = _stream(files, "text", batch_size, first_batch, True, seed, 10_000, shard, index_cache, segment_records)
    ds = ds.map(tf.strings.strip).batch(batch_size, drop_remainder=True).map(mask)
    return ds.prefetch(tf.data.AUTOTUNE)


def _stream(files, kind, batch_size, first_batch, training, seed, shuffle_buffer, shard, index_cache,
            segment_records):
    """The records of one pipeline from batch `first_batch` on; groups of ~`shuffle_buffer` records shuffled."""
    segments = index_files(files, kind, index_cache, segment_records)
    window = max(1, -(-shuffle_buffer // segment_records))
    return record_stream(segments, seed, shard[0], shard[1], window, training, first_record=first_batch * batch_size)
