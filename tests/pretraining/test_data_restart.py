"""pretraining-data restarts where it stopped (issue 50 item 3): one multi-worker run killed with SIGKILL at 3
points (a worker mid-run, the parent mid-run, every process while the shards are written), rerun each time with
the same command: the same bytes as a run never stopped, no temporary file left, and each rerun redoes none of
the units a killed run had committed (their markers keep their inodes; the last rerun says what it reused). Other
settings are named and start from zero; the leftovers of earlier versions' killed runs are removed."""

import hashlib
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from bert_keras.pretraining.instances import MaskingConfig
from bert_keras.pretraining.keyed import make_plan
from bert_keras_cli.main import main
from conftest import FIXTURES, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from process_tree import children, descendants, pool_workers, wait_gone  # noqa: E402

SHARDS = 64                 # many small shards: the last step lasts long enough to be stopped in
FLAGS = ["--shards", str(SHARDS), "--max-seq-length", "64", "--max-predictions-per-seq", "10", "--dupe-factor", "2",
         "--seed", "5", "--bucket-mb", "0.05", "--quiet"]


def synthetic_corpus(path, size: int) -> str:
    """`size` bytes of documents of 3-12 of the shipped corpus' sentences drawn at random (distinct documents)."""
    lines = [line.strip() for line in open(FIXTURES / "pretraining_corpus.txt", encoding="utf-8") if line.strip()]
    rng, docs, total = random.Random(0), [], 0
    while total < size:
        doc = "\n".join(rng.choice(lines) for _ in range(rng.randint(3, 12))) + "\n\n"
        docs.append(doc)
        total += len(doc.encode("utf-8"))
    path.write_text("".join(docs), encoding="utf-8")
    return str(path)


def digests(folder, name="o"):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob(f"{name}-*-of-*"))}


def markers(spill):
    """{unit: marker inode} of the committed units (a range's is removed once every bucket is committed)."""
    found = {}
    for p in spill.glob("*.done.json"):
        try:
            found[p.name[:-len(".done.json")]] = p.stat().st_ino
        except FileNotFoundError:
            pass
    return found


def count(done, kind):
    return sum(1 for unit in done if unit.startswith(kind + "-"))


@pytest.mark.integration
def test_killed_at_3_points_then_rerun_writes_the_uninterrupted_bytes_and_redoes_no_finished_unit(
        minilm_vocab, tmp_path):
    corpus = synthetic_corpus(tmp_path / "corpus.txt", 1_200_000)
    reference = tmp_path / "reference"
    assert main(["pretraining-data", corpus, "--out", str(reference / "o"), "--vocab", minilm_vocab, *FLAGS,
                 "--workers", "1"]) == 0
    expected = digests(reference)
    assert len(expected) == SHARDS
    out = tmp_path / "run"
    spill = out / ".o.spill"
    argv = [sys.executable, "-m", "bert_keras_cli.main", "pretraining-data", corpus, "--out", str(out / "o"),
            "--vocab", minilm_vocab, *FLAGS, "--workers", "2"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    plan = make_plan([corpus], SHARDS, MaskingConfig(), 5, 0.05)            # the work split: 23 ranges and buckets
    ranges, buckets = len(plan.ranges), plan.buckets

    def start():
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for(process, condition, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert process.poll() is None, f"the run ended before the kill point: {process.communicate()}"
            done = markers(spill) if spill.is_dir() else {}
            if condition(done):
                return
            time.sleep(0.005)
        raise AssertionError("kill point not reached")

    def settled(before):
        """After a kill: committed units never redone (same inode), shards present are whole (the reference's
        bytes), unfinished ones only under hidden temporary names."""
        done = markers(spill)
        for unit, inode in before.items():
            assert done.get(unit, inode) == inode, f"{unit}, committed, was written again"
            assert unit in done or unit.startswith("range-") and count(done, "bucket") == buckets, unit
        for name, digest in digests(out).items():
            assert digest == expected[name], f"{name} is in place but not whole"
        return done

    # 1. a worker killed mid-run (some buckets committed): the parent stops with one line that says to rerun
    process = start()
    wait_for(process, lambda done: 1 <= count(done, "bucket") < buckets - 4)
    workers = pool_workers(process.pid)
    assert workers and set(workers) <= set(children(process.pid)), "not forked from the command (local paths: " \
        "one TensorFlow import a command, its preprocessor runs no op before the pool)"
    os.kill(workers[0], signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2 and "rerun the same command" in err, err
    assert len(err.strip().splitlines()) == 1, err
    wait_gone(workers)
    first = settled({})
    assert count(first, "bucket") < buckets

    # 2. the parent killed mid-run, a few more buckets on: its workers go with it
    process = start()
    wait_for(process, lambda done: count(done, "bucket") >= count(first, "bucket") + 3 and
             count(done, "bucket") < buckets)
    tree = descendants(process.pid)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    wait_gone(tree)
    second = settled(first)
    assert count(second, "bucket") > count(first, "bucket")

    # 3. every process killed (a preemption) while the shards are written: frozen first, so the point is exact
    process = start()
    wait_for(process, lambda done: count(done, "bucket") == buckets and count(done, "shard") >= 1)
    tree = [process.pid] + descendants(process.pid)
    for pid in tree:
        os.kill(pid, signal.SIGSTOP)
    for pid in tree:
        os.kill(pid, signal.SIGKILL)
    process.communicate()
    wait_gone(tree)
    third = settled(second)
    assert count(third, "shard") < SHARDS and count(third, "bucket") == buckets

    # the rerun finishes the rest: the uninterrupted bytes, nothing else left, only the missing units done
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert (f"resumed a stopped run: {ranges} of {ranges} ranges, {buckets} of {buckets} buckets, "
            f"{count(third, 'shard')} of {SHARDS} shards were done") in run.stdout
    assert digests(out) == expected
    assert sorted(p.name for p in out.iterdir()) == sorted(expected)     # no spill folder, no .partial- file


def test_other_settings_are_named_and_start_from_zero_and_old_leftovers_go(minilm_vocab, tmp_path, capsys):
    """A stopped run's units made with another seed are not reused (the message names the seed); the spill
    folder of an earlier version's killed run and a shard's unfinished temporary are removed."""
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining.local import run_settings, spill_folder
    corpus = synthetic_corpus(tmp_path / "corpus.txt", 20_000)
    flags = ["--shards", "2", "--max-seq-length", "64", "--max-predictions-per-seq", "10", "--dupe-factor", "1",
             "--bucket-mb", "0.01", "--quiet", "--workers", "1"]
    assert main(["pretraining-data", corpus, "--out", str(tmp_path / "ref" / "o"), "--vocab", minilm_vocab,
                 *flags, "--seed", "6"]) == 0
    out = tmp_path / "run" / "o"
    plan = make_plan([corpus], 2, MaskingConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1), 5,
                     0.01)
    spill = spill_folder(str(out))
    os.makedirs(spill)
    with open(os.path.join(spill, "manifest.json"), "w") as f:          # a stopped run with --seed 5
        json.dump(run_settings(plan, str(out), BertPreprocessor(minilm_vocab), False), f)
    for b in range(plan.buckets):                                        # "done", with wrong contents
        open(os.path.join(spill, f"bucket-{b}.bin"), "wb").write(b"\0" * 64)
        open(os.path.join(spill, f"bucket-{b}.done.json"), "w").write('{"counts": [9, 9, 9], "chunks": [[], []]}')
    os.makedirs(tmp_path / "run" / ".o.spill-k2j4x9")                   # an earlier version's killed run
    (tmp_path / "run" / ".o.spill-k2j4x9" / "bucket-0.bin").write_bytes(b"x")
    (tmp_path / "run" / ".o-00001-of-00002.tfrecord.partial-abc.tfrecord").write_bytes(b"half")
    capsys.readouterr()
    assert main(["pretraining-data", corpus, "--out", str(out), "--vocab", minilm_vocab, *flags, "--seed", "6"]) == 0
    err = capsys.readouterr().err
    assert "not resuming the stopped run" in err and "(seed)" in err, err
    assert digests(out.parent) == digests(tmp_path / "ref")
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(digests(tmp_path / "ref"))


FAILED_ONCE = {}                # test state: which bundles have failed their first attempt (in-process runner)


def _failing_bucket_instances(plan, bucket, blobs, preprocessor, threads=None):
    """bucket_instances whose even buckets fail their first attempt after yielding one chunk."""
    from bert_keras.pretraining.keyed import BucketInstances, bucket_instances
    out = bucket_instances(plan, bucket, blobs, preprocessor, threads)
    if bucket % 2 or ("bucket", bucket) in FAILED_ONCE:
        return out

    def chunks():
        for i, chunk in enumerate(out.chunks):
            if i == 1:
                FAILED_ONCE[("bucket", bucket)] = True
                raise RuntimeError(f"injected: bucket {bucket}'s first attempt")
            yield chunk
    return BucketInstances(out.documents, out.sentences, out.instances, chunks())


def _failing_write_shard(path, frames):
    """write_shard whose every shard's first attempt fails after writing 5 records to its temporary file."""
    from bert_keras.pretraining.keyed import write_shard
    if ("shard", path) in FAILED_ONCE:
        return write_shard(path, frames)
    FAILED_ONCE[("shard", path)] = True

    def five_then_fail():
        for i, frame in enumerate(frames):
            if i == 5:
                raise RuntimeError(f"injected: {path}'s first attempt")
            yield frame
    return write_shard(path, five_then_fail())


@pytest.mark.beam
@pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None, reason="needs the [beam] extra")
def test_beam_bundles_failing_their_first_attempt_give_the_same_bytes(minilm_vocab, tmp_path, monkeypatch):
    """Beam's BundleBasedDirectRunner retries a failed bundle (up to 4 attempts; the FnApiRunner, DirectRunner's
    default, retries none): half the buckets fail after emitting a chunk, every shard's write fails after 5
    records, each on its first attempt; the retried run writes the local back end's bytes (no instance lost or
    twice) and leaves no temporary file."""
    import bert_keras.pretraining.beam as beam_module
    corpus = synthetic_corpus(tmp_path / "corpus.txt", 60_000)
    flags = ["--shards", "3", "--max-seq-length", "64", "--max-predictions-per-seq", "10", "--dupe-factor", "1",
             "--bucket-mb", "0.01", "--quiet"]
    assert main(["pretraining-data", corpus, "--out", str(tmp_path / "local" / "o"), "--vocab", minilm_vocab,
                 *flags, "--workers", "1"]) == 0
    FAILED_ONCE.clear()
    monkeypatch.setattr(beam_module, "bucket_instances", _failing_bucket_instances)
    monkeypatch.setattr(beam_module, "write_shard", _failing_write_shard)
    assert main(["pretraining-data", corpus, "--out", str(tmp_path / "beam" / "o"), "--vocab", minilm_vocab,
                 *flags, "--runner", "BundleBasedDirectRunner"]) == 0
    assert sum(k[0] == "bucket" for k in FAILED_ONCE) >= 2 and sum(k[0] == "shard" for k in FAILED_ONCE) == 3
    assert digests(tmp_path / "beam") == digests(tmp_path / "local") and len(digests(tmp_path / "local")) == 3
    assert sorted(p.name for p in (tmp_path / "beam").iterdir()) == sorted(digests(tmp_path / "local"))
