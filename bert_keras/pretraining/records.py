"""Pretraining TFRecords in google-research/bert's format, written and read.

Features (all fixed length; int64 unless noted), exactly run_pretraining.py's `name_to_features`:
  input_ids, input_mask, segment_ids        [max_seq_length]          0-padded
  masked_lm_positions, masked_lm_ids        [max_predictions_per_seq] 0-padded
  masked_lm_weights                         [max_predictions_per_seq] float32, 1.0 real / 0.0 padding
  next_sentence_labels                      [1]                       1 = B is a random next sentence
Records are encoded and framed in NumPy (example_proto.py, tfrecord_frames below); the keyed generator
(keyed.py) writes each shard to a temporary name and renames it, so a reader never sees a partial file.
"""

from __future__ import annotations

import dataclasses
import os

import google_crc32c as crc32c
import numpy as np
import tensorflow as tf

from bert_keras import storage
from bert_keras.pretraining.example_proto import example_blocks, join_blocks


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    int_seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    int_pred = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    return {"input_ids": int_seq, "input_mask": int_seq, "segment_ids": int_seq,
            "masked_lm_positions": int_pred, "masked_lm_ids": int_pred,
            "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}


# Names in google-research's order, with their dtypes: read off feature_spec, so the two cannot disagree.
FEATURE_DTYPES = {name: spec.dtype for name, spec in feature_spec(1, 1).items()}


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


def record_files(pattern: str) -> list[str]:
    """Files of a comma-separated list of globs or folders; an empty match is an error that names the pattern."""
    files = []
    for part in pattern.split(","):
        part = part.strip()
        files.extend(storage.glob(os.path.join(part, "*.tfrecord")) if storage.isdir(part) else storage.glob(part))
    if not files:
        raise FileNotFoundError(f"no pretraining records match {pattern!r} (write them with "
                                "`bert-keras pretraining-data`)")
    return files


def check_records(files: list[str], max_seq_length: int, max_predictions_per_seq: int, spec: dict | None = None) -> int:
    """Reads every record of every file; a truncated or corrupted file, or one with other lengths, is an error
    naming the file. `spec`: the features to parse, default feature_spec's (packed rows: packed_records'
    packed_feature_spec; records_are_packed tells which). Returns the number of records (rows, when packed)."""
    packed = spec is not None and "packed_sequence_ids" in spec
    spec = spec or feature_spec(max_seq_length, max_predictions_per_seq)
    total = 0
    for path in files:
        try:
            for record in tf.data.TFRecordDataset(path).batch(1024):
                tf.io.parse_example(record, spec)
                total += int(record.shape[0])
        except tf.errors.OpError as e:
            if not packed and _is_packed(path):
                raise ValueError(f"{path} holds packed rows (pretraining-data --pack): check it with the packed "
                                 "feature spec (the trainer reads packed files as such: records_are_packed)") from None
            kind = "packed pretraining TFRecord file (pretraining-data --pack)" if packed else \
                "pretraining TFRecord file"
            raise ValueError(f"{path}: not a readable {kind} with max_seq_length "
                             f"{max_seq_length} and max_predictions_per_seq {max_predictions_per_seq} "
                             f"({type(e).__name__}: {_op_message(e)})") from None
    return total


def _op_message(error) -> str:
    """A TensorFlow op error's first line without its `{{function_node ...}}` prefix, whole words only."""
    import re
    import textwrap
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", error.message).strip()
    return textwrap.shorten(text.splitlines()[0] if text else type(error).__name__, 240, placeholder=" ...")


@dataclasses.dataclass(frozen=True)
class RecordLayout:
    """What pretraining records hold, read off the records themselves (`record_layout`).

    Args:
        max_seq_length: int. Tokens a record (or packed row) holds: its input_ids' length.
        predictions: int. Its masked_lm_positions' length: max_predictions_per_seq, or a packed row's MLM slots
            (packed_records.packed_prediction_slots as written).
        packed: bool. Packed rows (pretraining-data --pack).

    Example:
        >>> RecordLayout(128, 20, False).max_seq_length
        128
    """
    max_seq_length: int
    predictions: int
    packed: bool


def record_layout(files: list[str]) -> RecordLayout:
    """The sequence length, masked LM slots and packed-ness the files were written with (pretraining-data
    --max-seq-length, --max-predictions-per-seq, --pack): each file's first record's feature lengths. Files that
    disagree (other lengths, packed and unpacked) are refused, naming one of each; so are files that are not
    TFRecords or not pretraining records. Runs no TensorFlow op (the framing is read in Python, the Example by
    protobuf): a multi-worker run calls it before its strategy, which must come before any op.

    Args:
        files: TFRecord paths (record_files' list).

    Returns:
        RecordLayout.

    Raises:
        ValueError: a file unreadable as TFRecords or holding other records, files that disagree, or no record
            in any file.

    Example:
        >>> record_layout(record_files("data/wiki-*.tfrecord"))                          # doctest: +SKIP
        RecordLayout(max_seq_length=128, predictions=20, packed=False)
    """
    from google.protobuf.message import DecodeError
    found = {}
    for path in files:
        try:
            first = _first_record(path)
            feature = None if first is None else tf.train.Example.FromString(first).features.feature
        except (ValueError, DecodeError):
            raise ValueError(f"{path}: its first record cannot be read as a tf.train.Example: not a pretraining "
                             "TFRecord file (or a truncated one); write them with `bert-keras pretraining-data`") \
                from None
        if feature is None:
            continue                                        # an empty shard
        missing = [name for name in ("input_ids", "masked_lm_positions") if name not in feature]
        if missing:
            raise ValueError(f"{path}: not pretraining records (no {' or '.join(missing)} feature): write them "
                             "with `bert-keras pretraining-data`")
        found[path] = RecordLayout(len(feature["input_ids"].int64_list.value),
                                   len(feature["masked_lm_positions"].int64_list.value),
                                   "packed_sequence_ids" in feature)
    if not found:
        raise ValueError(f"no records in {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}: write them "
                         "with `bert-keras pretraining-data`")
    (first_path, layout), *others = found.items()
    for path, other in others:
        if other.packed != layout.packed:
            packed, plain = (first_path, path) if layout.packed else (path, first_path)
            raise ValueError(f"the records mix packed rows ({packed}, pretraining-data --pack) and unpacked "
                             f"instances ({plain}): give files of one kind")
        if other != layout:
            raise ValueError(f"the records disagree: {first_path} holds {_describe(layout)}, {path} "
                             f"{_describe(other)}; give files written with the same settings")
    return layout


def _first_record(path: str) -> bytes | None:
    """The first record of a TFRecord file, its length and data checked against their masked CRC-32Cs (the
    framing tfrecord_frames writes); None for an empty file. ValueError: not a TFRecord file, or cut short."""
    with storage.open(path, "rb") as f:
        header = f.read(12)
        if not header:
            return None
        length = int.from_bytes(header[:8], "little") if len(header) == 12 else -1
        if length < 0 or not _crc_matches(header[:8], header[8:12]):
            raise ValueError(f"{path}: no TFRecord framing")
        data, crc = f.read(length), f.read(4)
        if len(data) < length or not _crc_matches(data, crc):
            raise ValueError(f"{path}: the first record is cut short or damaged")
    return data


def _crc_matches(data: bytes, masked_crc: bytes) -> bool:
    return len(masked_crc) == 4 and _bytes(_masked(np.array([crc32c.value(data)], np.uint32))).tobytes() == masked_crc


def _describe(layout: RecordLayout) -> str:
    kind = "packed rows" if layout.packed else "instances"
    slots = "MLM slots" if layout.packed else "max_predictions_per_seq"
    return f"{kind} of max_seq_length {layout.max_seq_length} and {slots} {layout.predictions}"


def records_are_packed(files: list[str]) -> bool:
    """Do the files hold packed rows (`pretraining-data --pack`) rather than google-research's instances? Each
    file's first record says; a mix of both is a ValueError naming one of each.

    Args:
        files: TFRecord paths (record_files' list).

    Returns:
        bool.

    Example:
        >>> records_are_packed(record_files("data/wiki-*.tfrecord"))               # doctest: +SKIP
        True
    """
    kinds = {path: _is_packed(path) for path in files}
    if len(set(kinds.values())) > 1:
        packed = next(path for path, kind in kinds.items() if kind)
        plain = next(path for path, kind in kinds.items() if not kind)
        raise ValueError(f"the records mix packed rows ({packed}, pretraining-data --pack) and unpacked instances "
                         f"({plain}): give files of one kind")
    return any(kinds.values())


def packed_record_slots(files: list[str]) -> int:
    """MLM slots a row of packed records holds (pretraining-data --pack wrote packed_records.packed_prediction_slots
    of its settings): the first file's first row's masked_lm_positions length, for packed_feature_spec. Every
    other row is checked against it when parsed (a fixed-length feature of another length is an error).

    Args:
        files: TFRecord paths of packed rows (records_are_packed(files) is True).

    Returns:
        int.

    Example:
        >>> packed_record_slots(record_files("data/wiki-packed-*.tfrecord"))        # doctest: +SKIP
        78
    """
    for path in files:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        if first is not None:
            feature = tf.train.Example.FromString(first.numpy()).features.feature
            if "masked_lm_positions" not in feature or "packed_sequence_ids" not in feature:
                raise ValueError(f"{path}: not packed pretraining rows (pretraining-data --pack)")
            return len(feature["masked_lm_positions"].int64_list.value)
    raise ValueError(f"no packed rows in {', '.join(files[:3])}")


def _is_packed(path: str) -> bool:
    """Does the file's first record have the packed rows' per-token sequence index (packed_records.py)?"""
    try:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        return first is not None and "packed_sequence_ids" in tf.train.Example.FromString(
            first.numpy()).features.feature
    except (tf.errors.OpError, ValueError):
        return False
