"""The keyed, order-free pretraining data generator: the steps both back ends (local.py, beam.py) run.

Every random draw is keyed on what it is about, never on the order work happens in, so the output files are a
function of (input, flags, seed) alone, whatever the number of workers, bundles or machines:

1. plan: the inputs' sizes give the number of buckets (total bytes / `bucket_mb`, at least 1) and byte ranges
   of each file (`range_documents` reads the documents that start in a range; a document runs past the range's
   end, never cut).
2. scatter: each document (its sentences joined by newlines, UTF-8) goes to bucket
   blake2b(text, key=seed)[:8] % buckets: a function of its content alone.
3. per bucket (`bucket_instances`): documents sorted by their key (the hash's other 8 bytes, then the text),
   tokenized, then google-research's recipe as instances.py runs it (chunks, A/B split, random next from a
   document of the same bucket, as the sharded peers do, truncation, masking), pass p drawing from
   np.random.default_rng([seed, bucket, p]). Instance i of bucket b gets the key splitmix64(blake2b(seed, b) + i)
   and goes to shard key % shards; a bucket's instances for shard s are packed and masked in key order, batch j
   drawing from default_rng([seed, bucket, s, j]), and come out as sorted chunks of framed TFRecords.
4. per shard (`merge_records`, `write_shard`): every bucket's chunks for it merged by (key, bucket, index), a
   total order, so chunks arriving in any order give the same bytes; written to a temporary name and renamed.

Input rules: text is UTF-8, and a byte that is not is an error naming the file, its line and byte offset (the
rule of every reader here, data/text_files.py; google-research's convert_to_unicode silently dropped such bytes); a
line of whitespace ends a document; a document over `bucket_mb` is an error naming the file and byte offset
(usually a file without blank lines between documents).
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import math
import os

import numpy as np

from bert_keras import storage
from bert_keras.data.text_files import decode_utf8
from bert_keras.pretraining.instances import (BLOCK_SENTENCES, MaskingConfig, VocabIds, chunk_pairs, mask_instances,
                                             pack_pairs, tokenize_documents)
from bert_keras.pretraining.records import _typed, tfrecord_frames

MB = 1 << 20
BATCH = 2048            # instances packed and masked at a time
CHUNK = 512             # records per chunk handed from a bucket to a shard (bounds the merge's memory)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What every worker needs to know: the work split, and the settings that make the output.

    files: the input paths; sizes: their bytes; ranges: (file index, start, end) byte ranges, each read by one
    scatter task; buckets, shards: counts; bucket_bytes: the largest document allowed."""
    files: tuple
    sizes: tuple
    ranges: tuple
    buckets: int
    shards: int
    bucket_bytes: int
    config: MaskingConfig
    seed: int

    def shard_path(self, out: str, shard: int) -> str:
        return f"{out}-{shard:05d}-of-{self.shards:05d}.tfrecord"


def _size(path: str) -> int:
    """Bytes of an input file; a missing, unreadable or non-file path is an error naming it."""
    if storage.is_remote(path):
        import tensorflow as tf
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"no such file: {path}")
        return tf.io.gfile.stat(path).length
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"{path} is not a file: give the text files themselves (e.g. {path}/*.txt)")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror} (check its permissions)") from None
    return os.path.getsize(path)


def _expand(inputs: list[str]) -> list[str]:
    """Inputs with a scheme (gs://...) and a wildcard are expanded by tf.io.gfile.glob, sorted (a shell expands
    local ones); a pattern matching nothing is an error."""
    files = []
    for path in inputs:
        if storage.is_remote(path) and any(c in path for c in "*?["):
            import tensorflow as tf
            found = sorted(tf.io.gfile.glob(path))
            if not found:
                raise FileNotFoundError(f"no file matches {path}")
            files.extend(found)
        else:
            files.append(path)
    return files


def make_plan(inputs: list[str], shards: int, config: MaskingConfig, seed: int, bucket_mb: float = 64) -> Plan:
    """The work split for `inputs` (see the module docstring). Errors: a missing or unreadable input, no bytes
    at all, shards < 1, bucket_mb not positive."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    if not bucket_mb > 0:
        raise ValueError(f"bucket_mb must be positive, got {bucket_mb}")
    files = tuple(_expand(inputs))
    sizes = tuple(_size(f) for f in files)
    total = sum(sizes)
    if total == 0:
        raise ValueError(f"the corpus is empty ({', '.join(files)} hold no bytes): give text files, one sentence a "
                         "line, a blank line between documents")
    bucket_bytes = max(1, int(bucket_mb * MB))
    ranges = tuple((i, start, min(start + bucket_bytes, size))
                   for i, size in enumerate(sizes) for start in range(0, size, bucket_bytes))
    return Plan(files, sizes, ranges, max(1, math.ceil(total / bucket_bytes)), shards, bucket_bytes, config, seed)


def range_documents(path: str, start: int, end: int, max_bytes: int):
    """The documents of `path` whose blank line before them starts in [start, end) (the file's first document
    belongs to the range starting at 0) -> lists of sentences (stripped, non-empty). Ranges that tile a file
    read every document exactly once. A document longer than `max_bytes` is an error."""
    with storage.open(path, "rb") as f:          # local, or gs://... through tf.io.gfile
        if start > 0:
            f.seek(start - 1)
            f.readline()                      # to the first line starting at or after `start`
        pos, owned, doc, size = f.tell(), start == 0, [], 0
        doc_start = pos
        while True:
            line = f.readline()
            if not line:
                break
            text = decode_utf8(line, path, offset=pos, line=None).strip()     # not UTF-8: file, line, offset
            if not text:
                if doc:
                    yield doc
                    doc, size = [], 0
                if pos >= end:
                    return
                owned = True
            elif owned:
                if not doc:
                    doc_start = pos
                doc.append(text)
                size += len(line)
                if size > max_bytes:
                    raise ValueError(
                        f"{path}: the document starting at byte {doc_start} is over {max_bytes / MB:.3g} MB, the "
                        "bucket size: documents are separated by blank lines (one sentence a line); if this one "
                        "is meant to be this long, raise --bucket-mb")
            pos += len(line)
        if doc:
            yield doc


def _doc_hash(text: bytes, seed: int) -> bytes:
    return hashlib.blake2b(text, digest_size=16, key=str(seed).encode()).digest()


def scatter_range(plan: Plan, r: int) -> dict:
    """Range r's documents by bucket -> {bucket: the documents' texts (lines joined by "\\n") joined by
    "\\n\\n", UTF-8}. A document's bucket depends on its text and the seed alone."""
    file, start, end = plan.ranges[r]
    out = {}
    for doc in range_documents(plan.files[file], start, end, plan.bucket_bytes):
        text = "\n".join(doc).encode("utf-8")
        bucket = int.from_bytes(_doc_hash(text, plan.seed)[:8], "big") % plan.buckets
        out.setdefault(bucket, []).append(text)
    return {b: b"\n\n".join(texts) for b, texts in out.items()}


def _seed64(seed: int) -> int:
    return seed % (1 << 64)                    # np.random.SeedSequence takes non-negative entropy


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on uint64 [N]: a bijection that scrambles consecutive inputs."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def instance_keys(seed: int, bucket: int, n: int) -> np.ndarray:
    """The keys of bucket `bucket`'s instances 0..n-1, uint64 [n]: distinct within a bucket, stable across
    machines (hashlib and fixed-width integer arithmetic, never Python's hash())."""
    base = int.from_bytes(hashlib.blake2b(f"{seed}/{bucket}".encode(), digest_size=8).digest(), "little")
    with np.errstate(over="ignore"):
        return _splitmix64(np.uint64(base) + np.arange(n, dtype=np.uint64))


def keyed_pairs(documents, config: MaskingConfig, seed: int, bucket: int,
                block_sentences: int = BLOCK_SENTENCES) -> np.ndarray:
    """One bucket's pairs (instances.chunk_pairs, documents in blocks of about `block_sentences` sentences), pass
    p drawing from default_rng([seed, bucket, p]); no shuffle (the instance keys order them) -> [N, 5] (A start,
    A length, B start, B length, is_random_next)."""
    rngs = (np.random.default_rng([_seed64(seed), bucket, p]) for p in range(config.dupe_factor))
    return chunk_pairs(documents, config, rngs, block_sentences)


@dataclasses.dataclass
class BucketInstances:
    """One bucket's output: counts, and `chunks`, an iterator of (shard, chunk bytes) made on demand (a batch of
    instances at a time), each shard's chunks in key order."""
    documents: int
    sentences: int
    instances: int
    chunks: object


def bucket_instances(plan: Plan, bucket: int, blobs, preprocessor, threads: int | None = None) -> BucketInstances:
    """Bucket `bucket`'s instances from its documents (`blobs`: scatter_range's values for it, in any order).

    The per-bucket function of both back ends. Memory: the bucket's text, its token ids and 40 bytes an
    instance, plus a batch."""
    texts = sorted((_doc_hash(t, plan.seed)[8:], t) for blob in blobs if blob for t in blob.split(b"\n\n"))
    documents = tokenize_documents([t.decode("utf-8").split("\n") for _, t in texts], preprocessor,
                                   threads=threads)
    del texts
    config, seed = plan.config, plan.seed
    pairs = keyed_pairs(documents, config, seed, bucket) if len(documents) else np.zeros((0, 5), np.int64)
    keys = instance_keys(seed, bucket, len(pairs))
    shard = (keys % np.uint64(plan.shards)).astype(np.int64)
    order = np.lexsort((keys, shard))                                      # by shard, then key
    bounds = np.searchsorted(shard[order], np.arange(plan.shards + 1))
    tokens = np.append(documents.tokens, np.int32(0))                      # padding reads the final 0
    vocab = VocabIds(list(preprocessor.vocab))

    def chunks():
        for s in range(plan.shards):
            rows = order[bounds[s]:bounds[s + 1]]
            for j, first in enumerate(range(0, len(rows), BATCH)):
                batch = rows[first:first + BATCH]
                rng = np.random.default_rng([_seed64(seed), bucket, s, j])
                features = mask_instances(pack_pairs(tokens, pairs[batch], vocab, config, rng), vocab, config, rng)
                data, ends = tfrecord_frames(_typed(features))
                for c in range(0, len(batch), CHUNK):
                    yield s, encode_chunk(bucket, keys[batch[c:c + CHUNK]], batch[c:c + CHUNK], data, ends, c)

    return BucketInstances(len(documents), sum(map(len, documents.lengths)), len(pairs), chunks())


def encode_chunk(bucket: int, keys: np.ndarray, index: np.ndarray, data: np.ndarray, ends: np.ndarray,
                 first: int) -> bytes:
    """Records first..first+len(keys)-1 of a batch's frames (data, ends from tfrecord_frames) -> one chunk:
    [bucket, n] then keys, indices and ends [n] (uint64 little-endian), then the frames."""
    n = len(keys)
    start = int(ends[first - 1]) if first else 0
    stop = int(ends[first + n - 1])
    # every part uint64 before joining: int64 with uint64 would promote to float64 and round the keys
    parts = [np.array([bucket, n]), keys, index, ends[first:first + n] - start]
    head = np.concatenate([np.asarray(p).astype("<u8") for p in parts])
    return head.tobytes() + data[start:stop].tobytes()


def chunk_records(chunk: bytes):
    """A chunk -> its records as (key, bucket, index, frame bytes), in the chunk's (key) order."""
    bucket, n = np.frombuffer(chunk, "<u8", 2).tolist()
    head = np.frombuffer(chunk, "<u8", 3 * n, 16)
    keys, index, ends = head[:n].tolist(), head[n:2 * n].tolist(), head[2 * n:].tolist()
    base = 16 + 24 * n
    for key, i, a, b in zip(keys, index, [0] + ends[:-1], ends):
        yield key, bucket, i, chunk[base + a:base + b]


def merge_records(streams):
    """Sorted record streams (iterables of chunk_records tuples) -> every record's frame, in (key, bucket,
    index) order: a total order, so the streams' own order does not matter."""
    for record in heapq.merge(*streams):
        yield record[3]


def write_shard(path: str, frames) -> int:
    """Frames -> `path`, written under a temporary name beside it and renamed (local paths or any tf.io.gfile
    scheme); returns the number of records."""
    n = 0
    if storage.is_remote(path):
        import tensorflow as tf
        tmp = f"{path}.partial-{os.getpid()}"
        try:
            with tf.io.gfile.GFile(tmp, "wb") as f:
                for frame in frames:
                    f.write(frame)
                    n += 1
            tf.io.gfile.rename(tmp, path, overwrite=True)
        except BaseException:
            if tf.io.gfile.exists(tmp):
                tf.io.gfile.remove(tmp)
            raise
        return n
    from bert_keras.atomic import atomic_file
    with atomic_file(path) as tmp, open(tmp, "wb", buffering=1 << 20) as f:
        for frame in frames:
            f.write(frame)
            n += 1
    return n
