"""Pretraining data at scale: peak memory of the keyed generator as the input grows, and documents/s per
worker (local pool with 1 and 2 workers, Beam's DirectRunner with 2) against google-research's
create_pretraining_data.py logic (google_pretraining_peer.py, its step-for-step re-implementation), in one run.

    python benchmarks/benchmark_pretraining_scale.py [--sizes-mb 2 8 32] [--bucket-mb 1] [--workers 2] [--beam]
                                                    [--skip-speed] [--skip-memory] [--skip-google] [--speed-mb 16]
                                                    [--out benchmarks/results/pretraining_scale.json]

Corpora: WikiText-2 valid + test (../shared/data, or $BERT_KERAS_SHARED_DATA) in google-research's format,
copied until each size is reached; every copy of a document gets a last sentence naming its copy, so documents
are distinct as in a real corpus (exact duplicates share a bucket). Memory: each run is a fresh
`bert-keras pretraining-data` process (dupe factor 1, 8 shards, --workers, --bucket-mb); resident memory is
sampled every 0.1 s over the process and its workers: the peak of their sum (RSS, which counts the pages forked
workers share with their server once per process; and PSS, which splits shared pages between the processes that
map them) and of the largest single process. Speed: --speed-mb of the same copies (dupe factor 5, seq 128,
--speed-shards shards, --speed-bucket-mb buckets), the same settings on every side, each side a fresh process
confined (CPU affinity) to as many cores as it has workers — google's script to one — and timed after its
imports; documents/s per core, and the pool's start (one TensorFlow import in the forkserver) apart. Run with a
Python that has the [beam] extra for --beam. Ratios come from one run of this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def shared_wikitext() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("BERT_KERAS_SHARED_DATA", REPO.parent / "shared" / "data")) / "wikitext-2"
    if not path.exists():
        raise SystemExit(f"{path} is absent: set BERT_KERAS_SHARED_DATA to the shared data folder")
    return path


def base_documents() -> list[list[str]]:
    from wikitext_to_sentences import articles
    wiki = shared_wikitext()
    return [a for name in ("valid.txt", "test.txt") for a in articles(str(wiki / name))]


def write_copies(documents, path: str, megabytes: float) -> int:
    """Copies of `documents` until `megabytes` (the document that reaches it is the last); returns the number of
    documents written."""
    target, written, n, copy = megabytes * (1 << 20), 0, 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            for d in documents:
                text = "\n".join(d) + f"\nThis is copy {copy} of the article .\n\n"
                f.write(text)
                written += len(text.encode("utf-8"))
                n += 1
                if written >= target:
                    break
            copy += 1
    return n


def tree_rss(pid: int) -> tuple[int, int, int]:
    """(RSS sum, PSS sum, largest RSS) of `pid` and its descendants, bytes."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    total, pss, largest, todo = 0, 0, 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/status") as f:
                rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
            with open(f"/proc/{p}/smaps_rollup") as f:
                pss += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
            total, largest = total + rss, max(largest, rss)
        except (OSError, StopIteration):
            pass
    return total, pss, largest


def measured(argv: list[str]) -> dict:
    """Runs argv, sampling its process tree's memory; -> seconds, peak RSS sum, PSS sum and largest single RSS
    (MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0, 0, 0]

    def sample():
        while process.poll() is None:
            peak[:] = map(max, peak, tree_rss(process.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = process.communicate()
    sampler.join()
    if process.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{err[-3000:]}")
    mb = lambda b: round(b / (1 << 20))                                                # noqa: E731
    return {"seconds": round(time.perf_counter() - start, 2), "peak_rss_mb": mb(peak[0]),
            "peak_pss_mb": mb(peak[1]), "largest_process_rss_mb": mb(peak[2]),
            "stdout": out.strip().splitlines()[-1][:300]}


def memory(sizes, vocab, workers, tmp, documents, bucket_mb) -> dict:
    results = {"workers": workers, "bucket_mb": bucket_mb, "dupe_factor": 1, "shards": 8}
    for mb in sizes:
        corpus = os.path.join(tmp, f"corpus_{mb}mb.txt")
        n = write_copies(documents, corpus, mb)
        argv = [sys.executable, "-m", "bert_keras_cli.main", "pretraining-data", corpus, "--out",
                os.path.join(tmp, f"keyed_{mb}"), "--vocab", vocab, "--dupe-factor", "1", "--shards", "8",
                "--workers", str(workers), "--bucket-mb", str(bucket_mb), "--quiet"]
        r = measured(argv)
        r.update(megabytes=round(os.path.getsize(corpus) / (1 << 20), 2), documents=n)
        print("keyed", mb, "MB:", r, flush=True)
        results[f"keyed_{mb}mb"] = r
        for f in pathlib.Path(tmp).glob("keyed_*"):
            f.unlink()
        os.remove(corpus)
    small, large = results[f"keyed_{min(sizes)}mb"], results[f"keyed_{max(sizes)}mb"]
    results["input_growth"] = round(large["megabytes"] / small["megabytes"], 2)
    results["peak_rss_growth"] = round(large["peak_rss_mb"] / small["peak_rss_mb"], 3)
    results["peak_pss_growth"] = round(large["peak_pss_mb"] / small["peak_pss_mb"], 3)
    results["largest_process_rss_growth"] = round(large["largest_process_rss_mb"] / small["largest_process_rss_mb"], 3)
    return results


def _pinned(cores: int, *args: str) -> dict:
    """Runs this script's `--side` in a fresh process confined to the first `cores` cores of this one (CPU
    affinity, inherited by every thread and process it starts: TensorFlow's pools, the forkserver, the workers);
    -> the JSON line it prints. The side's clock starts after its imports."""
    allowed = sorted(os.sched_getaffinity(0))[:cores]
    if len(allowed) < cores:
        raise SystemExit(f"{cores} cores asked for, {len(allowed)} usable")
    process = subprocess.run([sys.executable, __file__, "--side", *args], cwd=REPO, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)},
                             preexec_fn=lambda: os.sched_setaffinity(0, allowed))
    if process.returncode:
        raise SystemExit(f"side {args} failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def run_side(kind: str, corpus: str, vocab: str, out: str, workers: int, bucket_mb: float, shards: int) -> dict:
    """One timed side in this process (see _pinned)."""
    if kind == "google":
        from google_pretraining_peer import run_google
        t = time.perf_counter()
        _, instances, _ = run_google(corpus, vocab, 5, 12345, out + "-00000-of-00001.tfrecord")
        return {"seconds": time.perf_counter() - t, "instances": instances, "pool_start_s": 0.0}
    from bert_keras import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    pre = BertPreprocessor(vocab, lower_case=True)
    t = time.perf_counter()
    if kind == "beam":
        from bert_keras.pretraining.beam import run_beam
        result = run_beam([corpus], pre, out, shards, MaskingConfig(dupe_factor=5), 12345, bucket_mb=bucket_mb,
                          runner="DirectRunner", pipeline_args=["--direct_running_mode=multi_processing",
                                                                f"--direct_num_workers={workers}"])
    else:
        result = create_pretraining_data([corpus], pre, out, shards, MaskingConfig(dupe_factor=5), 12345,
                                         workers=workers, bucket_mb=bucket_mb)
    return {"seconds": time.perf_counter() - t, "instances": result["instances"],
            "pool_start_s": result.get("pool_start_s", 0.0), "phase_s": result.get("phase_s")}


def _digest(paths) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
    return digest.hexdigest()


def speed(vocab, tmp, documents, workers, beam, megabytes, bucket_mb, shards, google=True) -> dict:
    """Each side in its own process on as many cores as it has workers (google's script: one): per core
    figures are per core, not per process that may use every core through its threads."""
    corpus = os.path.join(tmp, "speed.txt")
    n_docs = write_copies(documents, corpus, megabytes)
    results = {"corpus": f"WikiText-2 valid + test copies, {os.path.getsize(corpus) / (1 << 20):.1f} MB",
               "documents": n_docs, "dupe_factor": 5, "seq_length": 128, "bucket_mb": bucket_mb, "shards": shards,
               "cores": "each side confined to as many cores as it has workers (CPU affinity)"}
    runs = [("google_research", "google", 1)] if google else []
    runs += [("local_1_worker", "local", 1), *[(f"local_{w}_workers", "local", w) for w in sorted({2, workers})]]
    if beam:
        runs.append(("beam_direct_2_workers", "beam", 2))
    digests = {}
    for name, kind, w in runs:
        r = _pinned(w, kind, corpus, vocab, os.path.join(tmp, name), str(w), str(bucket_mb), str(shards))
        seconds, start = r["seconds"], r["pool_start_s"]
        results[name] = {"cores": w, "workers": w, "seconds": round(seconds, 2), "instances": r["instances"],
                         "documents_per_s_per_core": round(n_docs / seconds / w, 1), "pool_start_s": round(start, 2),
                         "documents_per_s_per_core_after_start": round(n_docs / (seconds - start) / w, 1),
                         "phase_s": r.get("phase_s")}
        print(name, results[name], flush=True)
        files = sorted(pathlib.Path(tmp).glob(f"{name}-*.tfrecord"))
        if kind != "google":
            digests[name] = _digest(files)
        for f in files:                                  # a large corpus's outputs, one side at a time
            f.unlink()
    ours = list(digests)
    results["identical_bytes"] = len(set(digests.values())) == 1
    if google:
        g = results["google_research"]["seconds"]            # from the seconds, not the rounded rates
        results["per_core_vs_google"] = {name: round(g / (results[name]["seconds"] * results[name]["cores"]), 2)
                                         for name in ours}
    one, two = results["local_1_worker"]["seconds"], results["local_2_workers"]
    results["two_workers_speedup"] = round(one / two["seconds"], 2)
    results["two_workers_speedup_after_start"] = round(one / (two["seconds"] - two["pool_start_s"]), 2)
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes-mb", type=float, nargs="+", default=[2, 8, 32],
                   help="corpus sizes of the memory runs (the growth is largest / smallest)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--beam", action="store_true", help="also time Beam's DirectRunner (needs the [beam] extra)")
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--bucket-mb", type=float, default=1,
                   help="bucket size of the memory runs (at most the smallest size, so every size fills buckets)")
    p.add_argument("--speed-mb", type=float, default=16, help="corpus size of the speed runs")
    p.add_argument("--speed-bucket-mb", type=float, default=0.5, help="bucket size of the speed runs")
    p.add_argument("--speed-shards", type=int, default=4, help="output shards of the speed runs")
    p.add_argument("--skip-google", action="store_true",
                   help="time only our sides (a corpus large enough to show the pool's start amortized)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pretraining_scale.json"))
    p.add_argument("--side", nargs=7, help=argparse.SUPPRESS)          # internal: one timed side (_pinned)
    args = p.parse_args(argv)
    if args.side:
        kind, corpus, vocab, out, workers, bucket_mb, shards = args.side
        print(json.dumps(run_side(kind, corpus, vocab, out, int(workers), float(bucket_mb), int(shards))))
        return
    from bert_keras.atomic import write_json
    from bert_keras.loading import bundled_minilm_folder
    vocab = os.path.join(bundled_minilm_folder(), "vocab.txt")
    documents = base_documents()
    results = {"argv": sys.argv[1:] if argv is None else argv, "date": time.strftime("%Y-%m-%d %H:%M"),
               "commit": _commit(), "cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_speed:
            results["speed"] = speed(vocab, tmp, documents, args.workers, args.beam, args.speed_mb,
                                     args.speed_bucket_mb, args.speed_shards, google=not args.skip_google)
            write_json(args.out, results)
        if not args.skip_memory:
            results["memory"] = memory(args.sizes_mb, vocab, args.workers, tmp, documents,
                                       args.bucket_mb)
    results["load_average_at_end"] = os.getloadavg()
    write_json(args.out, results)
    print("wrote", args.out)


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


if __name__ == "__main__":
    main()
