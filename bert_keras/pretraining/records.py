"""Pretraining TFRecords in google-research/bert's format, written and read.

Features (all fixed length; int64 unless noted), exactly run_pretraining.py's `name_to_features`:
  input_ids, input_mask, segment_ids        [max_seq_length]          0-padded
  masked_lm_positions, masked_lm_ids        [max_predictions_per_seq] 0-padded
  masked_lm_weights                         [max_predictions_per_seq] float32, 1.0 real / 0.0 padding
  next_sentence_labels                      [1]                       1 = B is a random next sentence
Records are encoded and framed in NumPy (example_proto.py, tfrecord_frames below). Instances go round-robin over
the output shards, as google-research writes them; each shard is written to a temporary name and renamed, so a
reader never sees a partial file.
"""

from __future__ import annotations

import contextlib
import glob
import os

import google_crc32c as crc32c
import numpy as np
import tensorflow as tf

from bert_keras.atomic import atomic_file
from bert_keras.pretraining.example_proto import encode_examples, example_blocks, join_blocks
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


def serialize_examples(batches, batch_size: int = 2048):
    """Instances -> their serialized tf.train.Example protos (bytes), in order, as an iterator. `batches`: a
    sequence of {name: array [n, k]} (InstanceBatches, made on demand), or one such dict (cut in `batch_size`)."""
    def records(features):
        data, ends = encode_examples(_typed(features))
        data, ends = data.tobytes(), ends.tolist()
        return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]

    for batch in ordered_map(records, _as_batches(batches, batch_size)):
        yield from batch


def write_records(batches, paths: list[str], progress=None, batch_size: int = 2048) -> None:
    """Instances (InstanceBatches or one {name: array [N, ...]}, see serialize_examples) -> TFRecord files,
    round-robin over `paths` (instance k to shard k % len(paths), as google-research writes them).
    `progress(n)` is called after each batch of n records.

    Each batch is made, encoded and framed in NumPy on a thread per core (NumPy's array work runs without the
    GIL), as one block of bytes per shard; the caller's thread only appends them to the files."""
    batches = _as_batches(batches, batch_size)
    # every batch but the last is full (InstanceBatches knows its size without making a batch)
    size = getattr(batches, "batch_size", None) or (len(batches[0]["input_ids"]) if len(batches) else 0)

    def frame(b):
        features = _typed(batches[b])
        n = len(features["input_ids"])
        shard = (b * size + np.arange(n)) % len(paths)
        if len(paths) > 1:                           # each shard's records together, in order
            order = np.argsort(shard, kind="stable")
            features = {name: values[order] for name, values in features.items()}
        data, ends = tfrecord_frames(features)
        cuts = np.concatenate([[0], ends])[np.cumsum(np.bincount(shard, minlength=len(paths)))]
        return [data[start:end] for start, end in zip([0, *cuts[:-1]], cuts)], n

    with contextlib.ExitStack() as stack:            # every shard renamed into place on success, removed on error
        files = [stack.enter_context(open(stack.enter_context(atomic_file(p)), "wb")) for p in paths]
        for shards, n in ordered_map(frame, range(len(batches))):
            for f, data in zip(files, shards):
                f.write(data)
            if progress:
                progress(n)


def tfrecord_frames(features: dict) -> tuple[np.ndarray, np.ndarray]:
    """{name: [N, k] array} -> the N tf.train.Examples framed as TFRecords, back to back (uint8 [total]; the
    bytes tf.io.TFRecordWriter writes for them), and the end of each [N].

    A record is: its length (uint64, little-endian), the masked CRC-32C of those 8 bytes, the serialized
    Example, the masked CRC-32C of the Example (tensorflow/core/lib/io/record_writer.cc). The length and its
    check are two more column blocks in front of the Example's; its CRC is filled in once its bytes are in
    place (google-crc32c, which uses the CPU's CRC32 instruction), on a worker thread: cheaper than
    tf.io.TFRecordWriter's write per record (docs/performance.md)."""
    blocks, sizes = example_blocks(features)
    n = len(sizes)
    lengths = sizes.astype("<u8")
    distinct, which = np.unique(lengths, return_inverse=True)
    length_crc = _masked(np.array([crc32c.value(v.tobytes()) for v in distinct], np.uint32))[which.reshape(-1)]
    data = join_blocks([(lengths.view(np.uint8).reshape(n, 8), None), (_bytes(length_crc), None), *blocks,
                        (np.zeros((n, 4), np.uint8), None)])
    ends = np.cumsum(sizes + 16)
    stream, starts = data.tobytes(), (ends - sizes - 4).tolist()
    crcs = np.array([crc32c.value(stream[a:b]) for a, b in zip(starts, (ends - 4).tolist())], np.uint32)
    data[(ends - 4)[:, None] + np.arange(4)] = _bytes(_masked(crcs))
    return data, ends


def _masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC: rotated right by 15 bits, plus a constant (uint32 [N])."""
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(0xA282EAD8)


def _bytes(values: np.ndarray) -> np.ndarray:
    """uint32 [N] -> their little-endian bytes [N, 4]."""
    return values.astype("<u4").view(np.uint8).reshape(-1, 4)


def _typed(features: dict) -> dict:
    """google-research's features in its order and types (float32 weights, integers otherwise)."""
    return {name: np.asarray(features[name], np.float32 if dtype == tf.float32 else None)
            for name, dtype in FEATURE_DTYPES.items()}


def _as_batches(batches, batch_size: int):
    """InstanceBatches (or any sequence of feature dicts) as they are; one dict cut into `batch_size` rows each."""
    if isinstance(batches, dict):
        whole, n = batches, len(batches["input_ids"])
        return [{k: v[first:first + batch_size] for k, v in whole.items()} for first in range(0, n, batch_size)]
    return batches


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
