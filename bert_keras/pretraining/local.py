"""The local back end of the keyed generator (keyed.py): its three steps on a pool of processes, with bounded
memory, spilling between steps to a temporary folder beside the output.

1. scatter: each byte range's documents, grouped by bucket, into one file per range (`range-r.bin`);
2. buckets: each bucket reads its parts of every range file, makes its instances and writes their chunks,
   shard by shard, to `bucket-b.bin`;
3. shards: each shard merges its chunks from every bucket file, streaming, into the output shard (renamed into
   place when complete).
A worker holds one range, one bucket or a chunk per bucket at a time: peak memory follows `bucket_mb`, not the
corpus. With workers=1 everything runs in this process.

Restart where it stopped: each unit of work (a range, a bucket, a shard) is committed by the worker that did it,
its file renamed into place and then a marker `<unit>.done.json` (what the parent needs from it) written the same
way. The spill folder has a fixed name, `.<out>.spill` beside the output (the local temporary folder for gs://),
and a manifest of the settings that make the bytes (inputs with their sizes and modification times, flags, seed,
vocabulary, --pack). Rerunning the same command after a kill -9 (of a worker or of this process) skips the units
with a marker and runs the others; every unit is a function of the plan alone, so the bytes are those of a run
never stopped. Other settings name what differs and start from zero; the temporaries of a killed run (unfinished
units, shards' `.partial-` files, the random-named spill folders of earlier versions) are removed on rerun.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import glob
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures.process import BrokenProcessPool

from bert_keras import storage
from bert_keras.atomic import atomic_file, write_json
from bert_keras.pretraining.keyed import Plan, bucket_instances, chunk_records, merge_records, scatter_range, \
    write_shard
from bert_keras.pretraining.output_prefix import make_output_folder, remove_created_folders
from bert_keras.pretraining.packed_records import shard_frames
from bert_keras.pretraining.parallel import usable_cores

_WORKER = {}                       # per process: the preprocessor, the spill folder and thread count


def _init(vocab, lower_case, folder, threads, preprocessor=None, parent: int | None = None):
    if preprocessor is None:
        from bert_keras.preprocessing import BertPreprocessor
        preprocessor = BertPreprocessor(vocab, lower_case=lower_case)
    _WORKER.update(preprocessor=preprocessor, folder=folder, threads=threads)
    if parent is not None and os.name == "posix":
        threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def _exit_with(parent: int) -> None:
    """A worker's watch: it exits when the process that runs the pool is gone (killed -9, its pool never shut
    down), instead of waiting for work forever; an unfinished unit stays under its temporary name."""
    while _running(parent):
        time.sleep(0.5)
    os._exit(1)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")     # killed, not yet reaped
    except OSError:
        return True                                                             # no /proc: os.kill said so


def _ready(_) -> int:
    import time
    time.sleep(0.2)                 # long enough for every worker to take one of these
    return os.getpid()


def _commit_file(name: str):
    """A unit's file in the spill folder, written under a temporary name and renamed when complete."""
    return atomic_file(os.path.join(_WORKER["folder"], name))


def _mark_done(folder: str, unit: str, value) -> None:
    """The unit's commit: its marker, written after its file is in place (atomically: never half a marker)."""
    write_json(os.path.join(folder, f"{unit}.done.json"), value, indent=None)


def done_units(folder: str, kind: str, n: int) -> dict:
    """{i: marker value} of the units `<kind>-i` (i < n) committed in `folder`."""
    found = {}
    for i in range(n):
        path = os.path.join(folder, f"{kind}-{i}.done.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                found[i] = json.load(f)
    return found


def _scatter(plan: Plan, r: int) -> None:
    """Range r -> range-r.bin, bucket after bucket; its marker holds {bucket: (offset, length)}."""
    parts, index, offset = scatter_range(plan, r), {}, 0
    with _commit_file(f"range-{r}.bin") as tmp, open(tmp, "wb") as f:
        for bucket in sorted(parts):
            f.write(parts[bucket])
            index[bucket] = (offset, len(parts[bucket]))
            offset += len(parts[bucket])
    _mark_done(_WORKER["folder"], f"range-{r}", {str(b): v for b, v in index.items()})


def _bucket(plan: Plan, bucket: int, sections: list) -> None:
    """Bucket -> bucket-b.bin; its marker holds the counts and, per shard, its chunks' (offset, length) there."""
    blobs = []
    for r, offset, length in sections:
        with open(os.path.join(_WORKER["folder"], f"range-{r}.bin"), "rb") as f:
            f.seek(offset)
            blobs.append(f.read(length))
    out = bucket_instances(plan, bucket, blobs, _WORKER["preprocessor"], _WORKER["threads"])
    del blobs
    chunks, offset = [[] for _ in range(plan.shards)], 0
    with _commit_file(f"bucket-{bucket}.bin") as tmp, open(tmp, "wb") as f:
        for shard, chunk in out.chunks:
            f.write(chunk)
            chunks[shard].append((offset, len(chunk)))
            offset += len(chunk)
    _mark_done(_WORKER["folder"], f"bucket-{bucket}",
               {"counts": [out.documents, out.sentences, out.instances], "chunks": chunks})


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
    n = write_shard(plan.shard_path(out, shard), shard_frames(plan, merge_records(streams), pack))
    _mark_done(folder, f"shard-{shard}", {"records": n})
    return n


def _context(paths=()):
    """How the workers start. TensorFlow's import (4-5 s of CPU, the whole of a pool's start) is paid once a
    command: workers are forked from this process while TensorFlow has run no op in it (imported, its runtime
    not started: the `bert-keras` command, whose preprocessor makes its tensor at the first call), with every
    path local; else forked from a server that has imported TensorFlow and runs none of its ops (a process that
    has run ops, whose runtime's threads a fork would not copy; or gs:// paths, whose clients are started here).
    Linux only for fork (macOS' system libraries are not fork-safe); spawned where there is no forkserver
    (Windows)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and not any(storage.is_remote(p) for p in paths) and not _tensorflow_started():
        return multiprocessing.get_context("fork")
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bert_keras.pretraining.local"])
    return context


def _tensorflow_started() -> bool:
    """Whether TensorFlow's runtime (its thread pools) has started in this process: after its first op."""
    from tensorflow.python.eager import context
    ctx = context.context_safe()
    return ctx is not None and getattr(ctx, "_initialized", True)


def spill_folder(out: str) -> str:
    """Where a run for `out` keeps its units between steps and across a kill: `.<name>.spill` beside a local
    output; for an output with a scheme (gs://...), a folder named after it in the local temporary folder."""
    if storage.is_remote(out):
        return os.path.join(tempfile.gettempdir(), f"bert-keras-spill-{hashlib.sha256(out.encode()).hexdigest()[:16]}")
    out = os.path.abspath(out)
    return os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.spill")


def _mtime_ns(path: str) -> int:
    if storage.is_remote(path):
        import tensorflow as tf
        return int(tf.io.gfile.stat(path).mtime_nsec)
    return os.stat(path).st_mtime_ns


def run_settings(plan: Plan, out: str, preprocessor, pack: bool) -> dict:
    """What the bytes of a run depend on, as the spill folder's manifest records it: a rerun reuses units only
    when this is equal."""
    vocab = hashlib.sha256("\n".join(preprocessor.vocab).encode("utf-8")).hexdigest()
    return {"format": 1, "out": out, "inputs": [[f, size, _mtime_ns(f)] for f, size in zip(plan.files, plan.sizes)],
            "bucket_bytes": plan.bucket_bytes, "shards": plan.shards, "seed": plan.seed,
            "masking": dataclasses.asdict(plan.config), "vocab_sha256": vocab,
            "lower_case": bool(preprocessor.lower_case), "pack": bool(pack)}


def _remove_leftovers(out: str) -> None:
    """Temporaries a killed run leaves that no rerun reuses: shards' unfinished `.partial-` files and the
    random-named spill folders (`.<name>.spill-xxxx`) of earlier versions."""
    if storage.is_remote(out):
        import tensorflow as tf
        for path in tf.io.gfile.glob(f"{out}-*-of-*.tfrecord.partial-*"):
            tf.io.gfile.remove(path)
        return
    parent, name = os.path.split(os.path.abspath(out))
    for path in glob.glob(os.path.join(glob.escape(parent), f".{glob.escape(name)}-*-of-*.tfrecord.partial-*")):
        os.remove(path)
    for path in glob.glob(os.path.join(glob.escape(parent), f".{glob.escape(name)}.spill-*")):
        shutil.rmtree(path, ignore_errors=True)


def _open_spill(folder: str, settings: dict) -> None:
    """The spill folder for a run with `settings`: a stopped run's, when its manifest matches (its temporaries
    removed), else a new one (a mismatch is named on stderr)."""
    manifest = os.path.join(folder, "manifest.json")
    if os.path.isdir(folder):
        try:
            with open(manifest, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = None
        if old == settings:
            for name in os.listdir(folder):
                if name.startswith("."):                     # a unit a killed run had not finished
                    os.remove(os.path.join(folder, name))
            return
        if old is not None:
            changed = [k for k in settings if old.get(k) != settings[k]]
            print(f"pretraining-data: not resuming the stopped run in {folder}: it was made with other settings "
                  f"({', '.join(changed)}); starting from zero", file=sys.stderr)
        shutil.rmtree(folder)
    os.makedirs(folder)
    write_json(manifest, settings)


def run_local(plan: Plan, out: str, preprocessor, workers: int | None = None, progress=None,
              pack: bool = False) -> dict:
    """Runs the plan on `workers` processes (default: one per usable core, `usable_cores()`; no more than the
    ranges or buckets) -> counts (records: what the shards hold, instances or with `pack` packed rows), the
    shard paths, the workers used, the seconds their start took (pool_start_s), the seconds of each step after
    it (phase_s: ranges, buckets, shards) and the units a stopped run had finished and this one reused
    (resumed: ranges, buckets, shards; of `units`).

    A kill (of a worker or of this process) keeps the finished units: rerunning with the same arguments runs
    only the others and writes the same bytes (the module docstring). Bad input (ValueError) removes them, and
    the output's folder when this run created it.

    progress: None, or a function(phase name, total) returning a callback add(n)."""
    # more processes than ranges and buckets would only start TensorFlow for nothing (the bytes are the same)
    cores = usable_cores()
    workers = max(1, min(workers or cores, max(len(plan.ranges), plan.buckets)))
    threads = max(1, cores // workers)
    created = make_output_folder(out)              # removed again if the input is refused
    _remove_leftovers(out)
    folder = spill_folder(out)
    _open_spill(folder, run_settings(plan, out, preprocessor, pack))
    n = len(plan.ranges)
    units = {"ranges": n, "buckets": plan.buckets, "shards": plan.shards}
    done_before = {"ranges": done_units(folder, "range", n), "buckets": done_units(folder, "bucket", plan.buckets),
                   "shards": {s: v for s, v in done_units(folder, "shard", plan.shards).items()
                              if _exists(plan.shard_path(out, s))}}
    if len(done_before["buckets"]) == plan.buckets:
        done_before["ranges"] = dict.fromkeys(range(n))          # no bucket needs them: removed, or no longer
    try:
        with contextlib.ExitStack() as stack:
            pool_start = 0.0
            if workers == 1:
                _init(None, None, folder, threads, preprocessor)
                pool = None
                run = lambda fn, *args: map(fn, *args)                                      # noqa: E731
            else:
                context = _context((out, *plan.files))
                forked = context.get_start_method() == "fork"       # then the workers have this preprocessor
                pool = stack.enter_context(concurrent.futures.ProcessPoolExecutor(
                    workers, mp_context=context, initializer=_init,
                    initargs=(list(preprocessor.vocab), preprocessor.lower_case, folder, threads,
                              preprocessor if forked else None, os.getpid())))
                run = lambda fn, *args: pool.map(fn, *args)                                 # noqa: E731
                started = time.perf_counter()
                list(pool.map(_ready, range(2 * workers)))      # every worker is up
                pool_start = time.perf_counter() - started
            phases, t = {}, time.perf_counter()
            todo = [r for r in range(n) if r not in done_before["ranges"]]
            bar = progress("ranges", n) if progress else None
            bar and bar(n - len(todo))
            for _ in run(_scatter, [plan] * len(todo), todo):
                bar and bar(1)
            sections = [[] for _ in range(plan.buckets)]
            for r, index in sorted(done_units(folder, "range", n).items()):
                for bucket, (offset, length) in index.items():
                    sections[int(bucket)].append((r, offset, length))
            phases["ranges"], t = time.perf_counter() - t, time.perf_counter()
            todo = [b for b in range(plan.buckets) if b not in done_before["buckets"]]
            bar = progress("buckets", plan.buckets) if progress else None
            bar and bar(plan.buckets - len(todo))
            for _ in run(_bucket, [plan] * len(todo), todo, [sections[b] for b in todo]):
                bar and bar(1)
            counts, shard_chunks = [0, 0, 0], [{} for _ in range(plan.shards)]
            for bucket, marker in done_units(folder, "bucket", plan.buckets).items():
                counts = [a + b for a, b in zip(counts, marker["counts"])]
                for shard, cs in enumerate(marker["chunks"]):
                    shard_chunks[shard][bucket] = cs
            for r in range(n):                                  # every bucket is committed: ranges not needed
                for name in (f"range-{r}.done.json", f"range-{r}.bin"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(os.path.join(folder, name))
            if counts[0] < 2:
                raise ValueError(f"{counts[0]} non-empty document(s) in {', '.join(plan.files)}: next-sentence "
                                 "prediction needs at least two (separate documents by a blank line)")
            phases["buckets"], t = time.perf_counter() - t, time.perf_counter()
            todo = [s for s in range(plan.shards) if s not in done_before["shards"]]
            bar = progress("shards", plan.shards) if progress else None
            bar and bar(plan.shards - len(todo))
            for _ in run(_shard, [plan] * len(todo), [out] * len(todo), todo, [shard_chunks[s] for s in todo],
                         [pack] * len(todo)):
                bar and bar(1)
            written = sum(m["records"] for m in done_units(folder, "shard", plan.shards).values())
            phases["shards"] = time.perf_counter() - t
    except ValueError:                                  # bad input: nothing to resume, nothing left behind
        shutil.rmtree(folder, ignore_errors=True)
        remove_created_folders(created)
        raise
    except BrokenProcessPool:
        raise BrokenProcessPool(f"a worker process stopped (killed, or out of memory); the finished work is kept in "
                                f"{folder}: rerun the same command to do the rest") from None
    finally:
        _WORKER.clear()
    shutil.rmtree(folder, ignore_errors=True)
    assert written == counts[2] or pack, (written, counts)
    return {"documents": counts[0], "sentences": counts[1], "instances": counts[2], "records": written,
            "files": [plan.shard_path(out, s) for s in range(plan.shards)], "workers": workers,
            "pool_start_s": round(pool_start, 3), "phase_s": {k: round(v, 3) for k, v in phases.items()},
            "units": units, "resumed": {k: len(v) for k, v in done_before.items()}}


def _exists(path: str) -> bool:
    if storage.is_remote(path):
        import tensorflow as tf
        return tf.io.gfile.exists(path)
    return os.path.exists(path)
