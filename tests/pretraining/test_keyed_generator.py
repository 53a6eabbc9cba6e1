"""The keyed pretraining data generator: byte ranges read every document once; the output is a function of
(input, flags, seed) alone: the same bytes with 1 or 2 local workers, on Beam's DirectRunner (2 processes), with
the documents in another order or split over other files; each shard is sorted by instance key; the shards load
in the trainer's reader; bad input gets a clear error and leaves no shard behind."""

import importlib.util
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_keras_cli.main import main
from conftest import FIXTURES

SEQ, PRED = 64, 10
FLAGS = ["--shards", "3", "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED), "--dupe-factor", "2",
         "--seed", "5", "--bucket-mb", "0.008", "--quiet"]


def small_documents():
    """The shipped corpus' sentences as 44 documents of 6 sentences: several buckets at --bucket-mb 0.008."""
    lines = [line.strip() for line in open(FIXTURES / "pretraining_corpus.txt", encoding="utf-8") if line.strip()]
    return [lines[i:i + 6] for i in range(0, len(lines), 6)]


def write_corpus(path, documents):
    path.write_text("".join("\n".join(d) + "\n\n" for d in documents), encoding="utf-8")
    return str(path)


def run(inputs, out, vocab, *extra):
    assert main(["pretraining-data", *inputs, "--out", str(out), "--vocab", vocab, *FLAGS, *extra]) == 0
    return [p.read_bytes() for p in sorted(out.parent.glob(f"{out.name}-*-of-*.tfrecord"))]


@pytest.fixture(scope="module")
def local_one_worker(minilm_vocab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("keyed")
    corpus = write_corpus(tmp / "corpus.txt", small_documents())
    return corpus, run([corpus], tmp / "one", minilm_vocab, "--workers", "1")


def documents_by_blank_lines(data: bytes):
    """The reference reader: decode, split into lines, runs of non-blank lines."""
    docs, doc = [], []
    for line in data.decode("utf-8").split("\n"):
        if line.strip():
            doc.append(line.strip())
        elif doc:
            docs.append(doc)
            doc = []
    return docs + ([doc] if doc else [])


@pytest.mark.parametrize("range_bytes", [1, 7, 60, 1000, 10 ** 6])
def test_byte_ranges_read_every_document_once(tmp_path, range_bytes):
    from bert_keras.pretraining.keyed import range_documents
    data = ("first doc line\nsecond\n\n\n  \nnext doc\r\nnon-ASCII “é” kept\n \t\n\n"
            "third\nthird b\n\nlast without newline").encode("utf-8")
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    got = [d for start in range(0, len(data), range_bytes)
           for d in range_documents(str(path), start, min(start + range_bytes, len(data)), 1 << 20)]
    assert got == documents_by_blank_lines(data)
    assert got[1] == ["next doc", "non-ASCII “é” kept"] and len(got) == 4


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two cores")
def test_workers_and_threads_follow_the_cpu_affinity_not_the_machine():
    # taskset / a container's cpuset narrow the cores a process may use; os.cpu_count() still says the machine's.
    # Linux sets the affinity per thread, so this thread's affinity is what usable_cores() reads here.
    from bert_keras.pretraining.parallel import default_threads, usable_cores
    allowed = os.sched_getaffinity(0)
    assert usable_cores() == len(allowed)
    try:
        os.sched_setaffinity(0, {min(allowed)})
        assert (usable_cores(), default_threads()) == (1, 1) and os.cpu_count() >= 2
    finally:
        os.sched_setaffinity(0, allowed)


def test_two_workers_write_the_bytes_one_worker_writes(local_one_worker, minilm_vocab, tmp_path):
    corpus, one = local_one_worker
    assert len(one) == 3 and all(one)
    assert run([corpus], tmp_path / "two", minilm_vocab, "--workers", "2") == one
    assert not list(tmp_path.glob(".*"))                           # the spill folder is gone


def test_document_order_and_file_split_do_not_matter(local_one_worker, minilm_vocab, tmp_path):
    """Buckets come from each document's content and seed: the same documents shuffled over two files give the
    same bytes; another seed gives others."""
    _, one = local_one_worker
    documents = small_documents()
    order = np.random.default_rng(0).permutation(len(documents))
    first = write_corpus(tmp_path / "a.txt", [documents[i] for i in order[:20]])
    second = write_corpus(tmp_path / "b.txt", [documents[i] for i in order[20:]])
    assert run([second, first], tmp_path / "shuffled", minilm_vocab, "--workers", "1") == one
    assert run([first, second], tmp_path / "seed", minilm_vocab, "--workers", "1", "--seed", "6") != one


def test_shards_are_sorted_by_instance_key_and_hold_every_instance(minilm_vocab, tmp_path):
    """Recomputes the instance keys from their definition (hashlib blake2b of "seed/bucket", SplitMix64 on the
    instance number, written here in Python integers) and finds each shard's records in key order."""
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig
    from bert_keras.pretraining.keyed import bucket_instances, chunk_records, make_plan, scatter_range
    import hashlib
    corpus = write_corpus(tmp_path / "c.txt", small_documents())
    plan = make_plan([corpus], 3, MaskingConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=2),
                     5, 0.008)
    assert plan.buckets > 2 and len(plan.ranges) > 2
    parts = {}
    for r in range(len(plan.ranges)):
        for bucket, blob in scatter_range(plan, r).items():
            parts.setdefault(bucket, []).append(blob)
    pre = BertPreprocessor(minilm_vocab)
    mask = (1 << 64) - 1

    def splitmix(x):
        x = (x + 0x9E3779B97F4A7C15) & mask
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
        return x ^ (x >> 31)

    for bucket, blobs in parts.items():
        out = bucket_instances(plan, bucket, blobs, pre)
        base = int.from_bytes(hashlib.blake2b(f"5/{bucket}".encode(), digest_size=8).digest(), "little")
        seen = []
        for shard, chunk in out.chunks:
            for key, b, index, frame in chunk_records(chunk):
                assert b == bucket and key == splitmix((base + index) & mask) and key % 3 == shard
                seen.append((shard, key, index))
        assert seen == sorted(seen) and sorted(i for _, _, i in seen) == list(range(out.instances))


def test_shards_load_in_the_trainers_reader_with_its_resume_index(local_one_worker, tmp_path):
    from bert_keras.pretraining.dataset import records_dataset
    corpus, one = local_one_worker
    files = []
    for i, data in enumerate(one):
        files.append(str(tmp_path / f"s-{i}.tfrecord"))
        open(files[-1], "wb").write(data)
    total = sum(1 for _ in tf.data.TFRecordDataset(files))
    kwargs = dict(batch_size=8, max_seq_length=SEQ, max_predictions_per_seq=PRED, training=True, seed=3)
    whole = [x["input_word_ids"].numpy() for x, _ in records_dataset(files, **kwargs).take(6)]
    resumed = [x["input_word_ids"].numpy() for x, _ in records_dataset(files, first_batch=4, **kwargs).take(2)]
    assert total > 100
    np.testing.assert_array_equal(np.stack(resumed), np.stack(whole[4:6]))


def test_bad_input_gets_a_clear_error_and_no_shard(tmp_path, capsys, minilm_vocab):
    def fails(inputs, *extra):
        assert main(["pretraining-data", *map(str, inputs), "--out", str(tmp_path / "o"), "--vocab", minilm_vocab,
                     "--quiet", "--workers", "1", *extra]) == 2
        assert not list(tmp_path.glob("o-*")) and not list(tmp_path.glob(".o*"))
        return capsys.readouterr().err

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert "corpus is empty" in fails([empty])
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    assert "0 non-empty document" in fails([blank])
    assert "missing.txt" in fails([tmp_path / "missing.txt"])
    assert "is not a file" in fails([tmp_path])
    long = tmp_path / "long.txt"
    long.write_text("short document .\n\n" + "a sentence of a long document .\n" * 400)
    err = fails([long], "--bucket-mb", "0.01")
    assert re.search(r"long.txt: the document starting at byte 18 is over 0.01 MB", err) and "--bucket-mb" in err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_byte_that_is_not_utf8_is_named_and_nothing_is_written(minilm_vocab, tmp_path, capsys, workers):
    """Every reader's rule (data/text_files.py): the first byte that is not UTF-8 is an error naming the file, its
    line and its byte offset, also from a worker process and from a byte range that starts mid-file; no shard
    is left behind. (google-research's convert_to_unicode dropped such bytes without a word.)"""
    clean = write_corpus(tmp_path / "clean.txt", small_documents()[:30])
    data = open(clean, "rb").read()
    at = data.index(b"\n", 3000) + 1                      # past the first 0.002 MB range
    dirty = tmp_path / "dirty.txt"
    dirty.write_bytes(data[:at] + b"caf\xe9" + data[at:])
    assert main(["pretraining-data", str(dirty), "--out", str(tmp_path / "o"), "--vocab", minilm_vocab, "--quiet",
                 "--bucket-mb", "0.002", "--workers", workers]) == 2
    line = data[:at].count(b"\n") + 1
    err = capsys.readouterr().err.strip()
    assert err == (f"bert-keras pretraining-data: error: {dirty}, line {line}: not UTF-8: byte 0xe9 at byte offset "
                   f"{at + 3} (invalid continuation byte); save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 "
                   f"{dirty})")
    assert not list(tmp_path.glob("o-*")) and not list(tmp_path.glob(".o*"))


@pytest.mark.beam
@pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None, reason="needs the [beam] extra")
def test_beam_direct_runner_writes_the_local_bytes(local_one_worker, minilm_vocab, tmp_path):
    """Beam's DirectRunner (the FnApiRunner in multi_processing mode, 2 worker processes) runs the same
    per-range, per-bucket and per-shard functions: the same files."""
    corpus, one = local_one_worker
    assert run([corpus], tmp_path / "beam", minilm_vocab, "--runner", "DirectRunner",
               "--direct_running_mode=multi_processing", "--direct_num_workers=2") == one


@pytest.mark.slow
@pytest.mark.beam
@pytest.mark.skipif(importlib.util.find_spec("distributed") is None or importlib.util.find_spec("apache_beam") is None,
                    reason="needs the [dask] extra")
def test_beam_dask_runner_on_a_local_cluster_writes_the_local_bytes(local_one_worker, minilm_vocab, tmp_path):
    """A real cluster engine: Beam's DaskRunner on a dask.distributed LocalCluster of 2 worker processes."""
    from distributed import LocalCluster
    corpus, one = local_one_worker
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert len(cluster.workers) == 2
        assert run([corpus], tmp_path / "dask", minilm_vocab, "--runner", "DaskRunner",
                   f"--dask_client_address={cluster.scheduler_address}") == one
