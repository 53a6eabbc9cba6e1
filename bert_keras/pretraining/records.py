"""Pretraining TFRecords in google-research/bert's format, written and read.

Features (all fixed length; int64 unless noted), exactly run_pretraining.py's `name_to_features`:
  input_ids, input_mask, segment_ids        [max_seq_length]          0-padded
  masked_lm_positions, masked_lm_ids        [max_predictions_per_seq] 0-padded
  masked_lm_weights                         [max_predictions_per_seq] float32, 1.0 real / 0.0 padding
  next_sentence_labels                      [1]                       1 = B is a random next sentence
Records are encoded in NumPy (example_proto.py). Instances go round-robin over the output shards, as
google-research writes them; each shard is written to a temporary name and renamed, so a reader never sees a
partial file.
"""

from __future__ import annotations

import contextlib
import glob
import os

import numpy as np
import tensorflow as tf

from bert_keras.atomic import atomic_file
from bert_keras.pretraining.example_proto import encode_examples
from bert_keras.pretraining.parallel import ordered_map


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    int_seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    int_pred = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    return {"input_ids": int_seq, "input_mask": int_seq, "segment_ids": int_seq,
            "masked_lm_positions": int_pred, "masked_lm_ids": int_pred,
            "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}


# Names in google-research's order, with their dtypes: read off feature_spec, so the two cannot disagree.
FEATURE_DTYPES = {name: spec.dtype for name, spec in feature_spec(1, 1).items()}


def serialize_examples(batches, batch_size: int = 4096):
    """Instances -> their serialized tf.train.Example protos (bytes), in order, as an iterator. `batches`: a
    sequence of {name: array [n, k]} (InstanceBatches, made on demand), or one such dict (cut in `batch_size`)."""
    for records in _serialized_batches(batches, batch_size):
        yield from records


def _serialized_batches(batches, batch_size: int = 4096):
    """Per batch, the list of its serialized records. Each batch is made and encoded in NumPy
    (example_proto.encode_examples: the wire format written directly, not a Python object per record) on a
    thread per core: NumPy's array work runs without the GIL, so the next batches encode while the caller
    writes this one. The bytes equal protobuf's own deterministic serialization."""
    if isinstance(batches, dict):
        n = len(batches["input_ids"])
        whole = batches
        batches = [{k: v[first:first + batch_size] for k, v in whole.items()} for first in range(0, n, batch_size)]

    def encode(b):
        features = batches[b]
        data, ends = encode_examples({name: np.asarray(features[name], np.float32 if dtype == tf.float32 else None)
                                      for name, dtype in FEATURE_DTYPES.items()})
        data, ends = data.tobytes(), ends.tolist()
        return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]

    return ordered_map(encode, range(len(batches)))


def write_records(batches, paths: list[str], progress=None) -> None:
    """Instances (InstanceBatches or one {name: array [N, ...]}, see serialize_examples) -> records,
    round-robin over `paths` (instance k to shard k % len(paths), as google-research writes them).
    `progress(n)` is called after each batch of n records."""
    with contextlib.ExitStack() as stack:            # every shard renamed into place on success, removed on error
        writers = [tf.io.TFRecordWriter(stack.enter_context(atomic_file(p))) for p in paths]
        try:
            k = 0
            for records in _serialized_batches(batches):
                for i, writer in enumerate(writers):          # this batch's records of each shard
                    for record in records[(i - k) % len(writers)::len(writers)]:
                        writer.write(record)
                k += len(records)
                if progress:
                    progress(len(records))
        finally:
            for writer in writers:
                writer.close()


def record_files(pattern: str) -> list[str]:
    """Files of a comma-separated list of globs or folders; an empty match is an error that names the pattern."""
    files = []
    for part in pattern.split(","):
        part = part.strip()
        files.extend(sorted(glob.glob(os.path.join(part, "*.tfrecord")) if os.path.isdir(part) else glob.glob(part)))
    if not files:
        raise FileNotFoundError(f"no pretraining records match {pattern!r} (write them with "
                                "`bert-keras pretraining-data`)")
    return files


def check_records(files: list[str], max_seq_length: int, max_predictions_per_seq: int) -> int:
    """Reads every record of every file; a truncated or corrupted file, or one with other lengths, is an error
    naming the file. Returns the number of records."""
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    total = 0
    for path in files:
        try:
            for record in tf.data.TFRecordDataset(path).batch(1024):
                tf.io.parse_example(record, spec)
                total += int(record.shape[0])
        except tf.errors.OpError as e:
            raise ValueError(f"{path}: not a readable pretraining TFRecord file with max_seq_length "
                             f"{max_seq_length} and max_predictions_per_seq {max_predictions_per_seq} "
                             f"({type(e).__name__}: {e.message.splitlines()[0][:200]})") from None
    return total
