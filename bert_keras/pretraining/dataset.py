"""tf.data pipelines that feed BertPretrainer.fit: static records (google-research's files) or dynamic masking.

Both yield (x, y) with static shapes (TPUs):
  x: input_word_ids, input_mask, input_type_ids [B, S] int32; masked_lm_positions [B, P] int32
  y: masked_lm_ids [B, P] int32, masked_lm_weights [B, P] float32, next_sentence_labels [B] int32 (MLM+NSP only)
Training order is a function of the seed alone (file order, interleave and shuffle are seeded and deterministic),
so a resumed run that skips the batches already seen trains on exactly what an uninterrupted run would.
`shard=(i, n)`: the i-th of n disjoint parts, for one of n input pipelines (training/input_pipelines.py): whole
files when there are at least n, else every n-th record.
"""

from __future__ import annotations

import tensorflow as tf

from bert_keras.pretraining.records import feature_spec


def records_dataset(files: list[str], batch_size: int, max_seq_length: int, max_predictions_per_seq: int,
                    training: bool = True, seed: int = 0, skip_batches: int = 0, nsp: bool = True,
                    shuffle_buffer: int = 10_000, shard: tuple[int, int] = (0, 1)) -> tf.data.Dataset:
    spec = feature_spec(max_seq_length, max_predictions_per_seq)

    def parse(records):
        f = tf.io.parse_example(records, spec)
        f = {k: tf.cast(v, tf.float32 if k == "masked_lm_weights" else tf.int32) for k, v in f.items()}
        x = {"input_word_ids": f["input_ids"], "input_mask": f["input_mask"], "input_type_ids": f["segment_ids"],
             "masked_lm_positions": f["masked_lm_positions"]}
        y = {"masked_lm_ids": f["masked_lm_ids"], "masked_lm_weights": f["masked_lm_weights"]}
        if nsp:
            y["next_sentence_labels"] = f["next_sentence_labels"][:, 0]
        return x, y

    index, count = shard
    by_file = count > 1 and len(files) >= count
    files = files[index::count] if by_file else files
    ds = tf.data.Dataset.from_tensor_slices(files)
    if training:
        ds = ds.shuffle(len(files), seed=seed).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)), deterministic=True)
    if count > 1 and not by_file:
        ds = ds.shard(count, index)
    if training:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=training).map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                                           deterministic=True)
    if skip_batches:
        ds = ds.skip(skip_batches)
    return ds.prefetch(tf.data.AUTOTUNE)


def dynamic_masking_dataset(files: list[str], preprocessor, batch_size: int, max_seq_length: int = 128,
                            max_predictions_per_seq: int = 20, masked_lm_prob: float = 0.15, seed: int = 0,
                            skip_batches: int = 0, shard: tuple[int, int] = (0, 1)) -> tf.data.Dataset:
    """MLM-only (RoBERTa-style) batches from plain text, masked afresh each time a line comes round: TF.Text's
    RandomItemSelector picks `masked_lm_prob` of the real tokens (never [CLS]/[SEP]/[PAD], at most
    `max_predictions_per_seq`), MaskValuesChooser makes them [MASK] 80%, random 10%, unchanged 10%.
    Each non-empty line is one sequence: [CLS] tokens [SEP], cut to max_seq_length."""
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

    ds = tf.data.TextLineDataset(files).map(tf.strings.strip).filter(lambda line: tf.strings.length(line) > 0)
    if shard[1] > 1:
        ds = ds.shard(shard[1], shard[0])
    ds = ds.shuffle(10_000, seed=seed).repeat().batch(batch_size, drop_remainder=True).map(mask)
    if skip_batches:
        ds = ds.skip(skip_batches)
    return ds.prefetch(tf.data.AUTOTUNE)
