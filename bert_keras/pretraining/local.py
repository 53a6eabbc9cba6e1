"""The local back end of the keyed generator (keyed.py): its three steps on a pool of processes, with bounded
memory, spilling between steps to a temporary folder beside the output.

1. scatter: each byte range's documents, grouped by bucket, into one file per range (`range-r.bin`);
2. buckets: each bucket reads its parts of every range file, makes its instances and writes their chunks,
   shard by shard, to `bucket-b.bin`;
3. shards: each shard merges its chunks from every bucket file, streaming, into the output shard (renamed into
   place when complete).
A worker holds one range, one bucket or a chunk per bucket at a time: peak memory follows `bucket_mb`, not the
corpus. With workers=1 everything runs in this process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import shutil
import tempfile
import time

from bert_keras.pretraining.keyed import Plan, bucket_instances, chunk_records, merge_records, scatter_range, \
    write_shard
from bert_keras.pretraining.packed_records import shard_frames
from bert_keras.pretraining.parallel import usable_cores

_WORKER = {}                       # per process: the preprocessor, the spill folder and thread count


def _init(vocab, lower_case, folder, threads, preprocessor=None):
    if preprocessor is None:
        from bert_keras.preprocessing import BertPreprocessor
        preprocessor = BertPreprocessor(vocab, lower_case=lower_case)
    _WORKER.update(preprocessor=preprocessor, folder=folder, threads=threads)


def _ready(_) -> int:
    import time
    time.sleep(0.2)                 # long enough for every worker to take one of these
    return os.getpid()


def _scatter(plan: Plan, r: int) -> dict:
    """Range r -> range-r.bin, bucket after bucket; returns {bucket: (offset, length)}."""
    parts, index, offset = scatter_range(plan, r), {}, 0
    with open(os.path.join(_WORKER["folder"], f"range-{r}.bin"), "wb") as f:
        for bucket in sorted(parts):
            f.write(parts[bucket])
            index[bucket] = (offset, len(parts[bucket]))
            offset += len(parts[bucket])
    return index


def _bucket(plan: Plan, bucket: int, sections: list) -> tuple:
    """Bucket -> bucket-b.bin; returns the counts and, per shard, its chunks' (offset, length) in that file."""
    blobs = []
    for r, offset, length in sections:
        with open(os.path.join(_WORKER["folder"], f"range-{r}.bin"), "rb") as f:
            f.seek(offset)
            blobs.append(f.read(length))
    out = bucket_instances(plan, bucket, blobs, _WORKER["preprocessor"], _WORKER["threads"])
    del blobs
    chunks, offset = [[] for _ in range(plan.shards)], 0
    with open(os.path.join(_WORKER["folder"], f"bucket-{bucket}.bin"), "wb") as f:
        for shard, chunk in out.chunks:
            f.write(chunk)
            chunks[shard].append((offset, len(chunk)))
            offset += len(chunk)
    return (out.documents, out.sentences, out.instances), chunks


def _bucket_stream(path: str, chunks: list):
    """One bucket's records for a shard, read a chunk at a time."""
    with open(path, "rb") as f:
        for offset, length in chunks:
            f.seek(offset)
            yield from chunk_records(f.read(length))


def _shard(plan: Plan, out: str, shard: int, chunks: dict, pack: bool = False) -> int:
    """Shard -> its output file; `chunks`: {bucket: [(offset, length)]} of its chunks. pack: packed rows
    (packed_records.pack_record_frames) instead of one instance a record."""
    folder = _WORKER["folder"]
    streams = [_bucket_stream(os.path.join(folder, f"bucket-{b}.bin"), c) for b, c in sorted(chunks.items()) if c]
    return write_shard(plan.shard_path(out, shard), shard_frames(plan, merge_records(streams), pack))


def _context():
    """Workers forked from a server that has imported TensorFlow (and run none of its ops, so forking is safe):
    the import is paid once, not once a worker. Spawned where there is no forkserver (Windows)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bert_keras.pretraining.local"])
    return context


def run_local(plan: Plan, out: str, preprocessor, workers: int | None = None, progress=None,
              pack: bool = False) -> dict:
    """Runs the plan on `workers` processes (default: one per usable core, `usable_cores()`; no more than the
    ranges or buckets) -> counts (records: what the shards hold, instances or with `pack` packed rows), the
    shard paths, the workers used, the seconds their start took (pool_start_s) and the seconds of each step after
    it (phase_s: ranges, buckets, shards).

    progress: None, or a function(phase name, total) returning a callback add(n)."""
    # more processes than ranges and buckets would only start TensorFlow for nothing (the bytes are the same)
    cores = usable_cores()
    workers = max(1, min(workers or cores, max(len(plan.ranges), plan.buckets)))
    threads = max(1, cores // workers)
    if "://" in out:                                    # gs://...: spill to the local temporary folder
        parent = None
    else:
        parent = os.path.dirname(os.path.abspath(out))
        os.makedirs(parent, exist_ok=True)
    folder = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(out)}.spill-")
    try:
        with contextlib.ExitStack() as stack:
            pool_start = 0.0
            if workers == 1:
                _init(None, None, folder, threads, preprocessor)
                pool = None
                run = lambda fn, *args: map(fn, *args)                                      # noqa: E731
            else:
                pool = stack.enter_context(concurrent.futures.ProcessPoolExecutor(
                    workers, mp_context=_context(), initializer=_init,
                    initargs=(list(preprocessor.vocab), preprocessor.lower_case, folder, threads)))
                run = lambda fn, *args: pool.map(fn, *args)                                 # noqa: E731
                started = time.perf_counter()
                list(pool.map(_ready, range(2 * workers)))      # every worker has started TensorFlow
                pool_start = time.perf_counter() - started
            phases, t = {}, time.perf_counter()
            n = len(plan.ranges)
            bar = progress("ranges", n) if progress else None
            sections = [[] for _ in range(plan.buckets)]
            for r, index in enumerate(run(_scatter, [plan] * n, range(n))):
                for bucket, (offset, length) in index.items():
                    sections[bucket].append((r, offset, length))
                bar and bar(1)
            phases["ranges"], t = time.perf_counter() - t, time.perf_counter()
            bar = progress("buckets", plan.buckets) if progress else None
            counts, shard_chunks = [0, 0, 0], [{} for _ in range(plan.shards)]
            for bucket, (c, chunks) in enumerate(run(_bucket, [plan] * plan.buckets, range(plan.buckets), sections)):
                counts = [a + b for a, b in zip(counts, c)]
                for shard, cs in enumerate(chunks):
                    shard_chunks[shard][bucket] = cs
                bar and bar(1)
            for r in range(n):
                os.remove(os.path.join(folder, f"range-{r}.bin"))
            if counts[0] < 2:
                raise ValueError(f"{counts[0]} non-empty document(s) in {', '.join(plan.files)}: next-sentence "
                                 "prediction needs at least two (separate documents by a blank line)")
            phases["buckets"], t = time.perf_counter() - t, time.perf_counter()
            bar = progress("shards", plan.shards) if progress else None
            written = 0
            for k in run(_shard, [plan] * plan.shards, [out] * plan.shards, range(plan.shards), shard_chunks,
                         [pack] * plan.shards):
                written += k
                bar and bar(1)
            phases["shards"] = time.perf_counter() - t
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        _WORKER.clear()
    assert written == counts[2] or pack, (written, counts)
    return {"documents": counts[0], "sentences": counts[1], "instances": counts[2], "records": written,
            "files": [plan.shard_path(out, s) for s in range(plan.shards)], "workers": workers,
            "pool_start_s": round(pool_start, 3), "phase_s": {k: round(v, 3) for k, v in phases.items()}}
