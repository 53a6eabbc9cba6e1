"""Where pretraining batch n comes from, without reading batches 0 … n-1: the input position is a pure function
of (seed, n), so a resume at step 900k starts reading at once instead of re-reading 900k batches.

The files are cut into *segments* of `SEGMENT` (or `segment_records`) consecutive records (TFRecord frames, or
non-empty text lines), each a byte range found once by `index_files` (a scan of the frame headers or of the
lines; cached beside the checkpoint). One epoch of one input pipeline is:

    segments ── seeded permutation of all segments (seed, epoch) ── every `shards`-th, from `shard`
             ── groups of `window` segments ── each group's records shuffled (seed, epoch, group) ── stream
    (fewer segments than pipelines: every pipeline takes every segment and every `shards`-th record of a group)

and a pipeline's batches are consecutive `batch_size` runs of its stream, across group and epoch boundaries. So
batch n starts at record n·batch_size of the stream: `start_of` walks the per-epoch and per-group record counts
(arrays, no reading) to the group holding it and the record within that group; the dataset opens that group and
skips at most one group's records. Reads are byte ranges (tf.io.gfile: local disks and gs:// alike), decoded
here (TFRecord framing: length u64, its CRC u32, data, CRC u32).

Why segments, not records: an index of every record would be 8 bytes × 10^8 records for a BERT-Large corpus;
one offset per 256 records is 400× smaller and reads stay sequential within a segment.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct

import numpy as np
import tensorflow as tf

from bert_keras import storage
from bert_keras.atomic import atomic_file

SEGMENT = 256                 # records per segment (index_files' default)
_CHUNK = 1 << 24              # bytes read at a time while indexing


@dataclasses.dataclass(frozen=True)
class Segments:
    """Byte ranges of the segments of `files`, in file order. Arrays are [S]."""
    files: tuple[str, ...]
    kind: str                 # "tfrecord" or "text"
    file_id: np.ndarray       # int32: which file
    start: np.ndarray         # int64: first byte
    end: np.ndarray           # int64: one past the last byte
    count: np.ndarray         # int64: records in the segment (segment_records, fewer at a file's end)

    def read(self, segment: int) -> list[bytes]:
        """The records of one segment, in file order."""
        return self.read_many([segment])[0]

    def read_many(self, segments: list[int]) -> list[list[bytes]]:
        """The records of each segment, in the order given; each file is opened once (a group of 40 segments of
        one file is one open, not 40: the difference on gs://)."""
        by_file = {}
        for segment in sorted(set(segments)):                  # each file's segments in file order
            by_file.setdefault(int(self.file_id[segment]), []).append(segment)
        found = {}
        for file_id, in_file in by_file.items():
            path = self.files[file_id]
            with storage.open(path, "rb") as f:
                for segment in in_file:
                    f.seek(int(self.start[segment]))
                    data = f.read(int(self.end[segment] - self.start[segment]))
                    found[segment] = self._records(segment, path, data)
        return [found[s] for s in segments]

    def _records(self, segment: int, path: str, data: bytes) -> list[bytes]:
        records = _frames(data) if self.kind == "tfrecord" else [l for l in data.split(b"\n") if l.strip()]
        if records is None or len(records) != self.count[segment]:
            raise ValueError(f"{path} changed since it was indexed (segment {segment} no longer holds "
                             f"{self.count[segment]} whole records): delete the index and start again")
        return records


def index_files(files: list[str], kind: str, cache: str | None = None,
                segment_records: int = SEGMENT) -> Segments:
    """Segments of `files` ("tfrecord" or "text") of `segment_records` records each (fewer at a file's end). With
    `cache` (an .npz path), a previous index of the same files (same paths and sizes, same segment size) is reused,
    and a new one is written there."""
    if segment_records < 1:
        raise ValueError(f"segment_records must be at least 1, got {segment_records}")
    key = hashlib.sha256(json.dumps([kind, segment_records, [(f, tf.io.gfile.stat(f).length) for f in files]])
                         .encode()).hexdigest()
    if cache and storage.exists(cache):
        with np.load(storage.local_copy(cache)) as saved:
            if str(saved["key"]) == key:
                return Segments(tuple(files), kind, *(saved[k] for k in ("file_id", "start", "end", "count")))
    parts = [_index_one(path, kind, segment_records) for path in files]
    segments = Segments(tuple(files), kind, np.concatenate([np.full(len(s), i, np.int32) for i, (s, _, _) in
                                                            enumerate(parts)]),
                        *(np.concatenate([p[j] for p in parts]).astype(np.int64) for j in range(3)))
    if cache:
        with atomic_file(cache) as tmp:
            np.savez(tmp, key=key, file_id=segments.file_id, start=segments.start, end=segments.end,
                     count=segments.count)
    return segments


def stream_order(segments: Segments, seed: int, epoch: int, shard: int, shards: int, training: bool) -> np.ndarray:
    """The segments one pipeline reads in one epoch, in order: a seeded permutation (file order when not
    training), every `shards`-th from `shard`."""
    everything = np.arange(len(segments.count))
    if training:
        everything = np.random.default_rng([seed, epoch]).permutation(everything)
    return everything[shard::shards]


def groups(order: np.ndarray, window: int) -> list[np.ndarray]:
    return [order[i:i + window] for i in range(0, len(order), window)]


def split(segments: Segments, shard: int, shards: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """How pipeline `shard` of `shards` takes its part: (by segment, by record) as (index, count) pairs. Every
    `shards`-th segment; with fewer segments than pipelines, every segment and every `shards`-th record of each
    group instead (small data sets: no pipeline is left empty)."""
    return ((shard, shards), (0, 1)) if shards <= len(segments.count) else ((0, 1), (shard, shards))


def start_of(segments: Segments, position: int, seed: int, shard: int, shards: int, window: int,
             training: bool) -> tuple[int, int, int]:
    """(epoch, group, record within the group) of record `position` of a pipeline's stream: counts only."""
    (s_index, s_count), (r_index, r_count) = split(segments, shard, shards)
    epoch = 0
    if s_count == r_count == 1:                      # every epoch holds every record
        epoch, position = divmod(position, int(segments.count.sum()))
    while True:
        order = stream_order(segments, seed, epoch, s_index, s_count, training)
        sizes = np.array([len(range(r_index, segments.count[g].sum(), r_count)) for g in groups(order, window)],
                         np.int64)
        if position < sizes.sum() or not training:
            break
        position -= int(sizes.sum())
        epoch += 1
    ends = np.cumsum(sizes)
    group = int(np.searchsorted(ends, position, side="right"))
    return epoch, group, int(position - (ends[group - 1] if group else 0))


def record_stream(segments: Segments, seed: int, shard: int, shards: int, window: int, training: bool,
                  first_record: int = 0) -> tf.data.Dataset:
    """tf.string records of one pipeline's stream, from record `first_record` on (forever when training; one
    epoch otherwise)."""
    epoch0, group0, skip = start_of(segments, first_record, seed, shard, shards, window, training)
    (s_index, s_count), (r_index, r_count) = split(segments, shard, shards)

    def planned():                                   # (segment ids of a group, its shuffle seed) in stream order
        epoch, group = epoch0, group0
        while True:
            for ids in groups(stream_order(segments, seed, epoch, s_index, s_count, training), window)[group:]:
                yield ids, np.array([seed, epoch, group], np.int64)
                group += 1
            if not training:
                return
            epoch, group = epoch + 1, 0

    def read(ids, group_seed):
        records = [r for part in segments.read_many([int(i) for i in ids]) for r in part]
        if training:
            records = [records[k] for k in np.random.default_rng(group_seed.tolist()).permutation(len(records))]
        return np.array(records[r_index::r_count], dtype=object)

    plan = tf.data.Dataset.from_generator(planned, output_signature=(tf.TensorSpec([None], tf.int64),
                                                                     tf.TensorSpec([3], tf.int64)))
    ds = plan.map(lambda ids, s: tf.ensure_shape(tf.numpy_function(read, [ids, s], tf.string, stateful=False),
                                                 [None]), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.unbatch().skip(skip)


def _frames(data: bytes) -> list[bytes] | None:
    """TFRecord frames back to back -> their payloads; None if the frames do not tile `data` exactly."""
    out, pos, view = [], 0, memoryview(data)
    while pos + 8 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append(bytes(view[pos + 12:pos + 12 + length]))
        pos += length + 16
    return out if pos == len(data) else None


def _index_one(path: str, kind: str, segment: int) -> tuple[list[int], list[int], list[int]]:
    """(starts, ends, counts) of one file's segments of `segment` records."""
    size = tf.io.gfile.stat(path).length
    starts = []
    with storage.open(path, "rb") as f:
        if kind == "tfrecord":
            pos, base, buf, n = 0, 0, b"", 0
            while pos < size:
                if pos + 8 > base + len(buf):
                    f.seek(pos)
                    buf, base = f.read(_CHUNK), pos
                    if len(buf) < 8:
                        raise ValueError(f"{path}: truncated TFRecord file (a record header ends at byte {size})")
                if n % segment == 0:
                    starts.append(pos)
                (length,) = struct.unpack_from("<Q", buf, pos - base)
                pos, n = pos + length + 16, n + 1
            if pos != size:
                raise ValueError(f"{path}: truncated TFRecord file (its last record needs {pos} bytes, the file "
                                 f"has {size}): write it again with `bert-keras pretraining-data`")
        else:
            from bert_keras.data.text_files import decode_utf8
            pos, n = 0, 0
            for number, line in enumerate(f, 1):
                decode_utf8(line, path, offset=pos, line=number)     # not UTF-8: named (file, line, byte offset)
                if line.strip():
                    if n % segment == 0:
                        starts.append(pos)
                    n += 1
                pos += len(line)
    counts = [segment] * (len(starts) - 1) + ([n - segment * (len(starts) - 1)] if starts else [])
    return starts, starts[1:] + [size], counts
