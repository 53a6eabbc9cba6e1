"""`bert-keras pretraining-data --pack`: the same instances as without --pack, packed by packing.pack_lengths in
each shard's key order; the same bytes with 1 or 2 workers and on Beam; the trainer's record check names packed
files instead of failing on them."""

import importlib.util

import numpy as np
import pytest
import tensorflow as tf
from test_keyed_generator import FLAGS, PRED, small_documents, write_corpus

from bert_keras.pretraining.packed_records import packed_prediction_slots, parse_packed_examples, unpack_rows
from bert_keras.pretraining.packing import pack_lengths
from bert_keras.pretraining.records import check_records, feature_spec, packed_record_slots
from bert_keras_cli.main import main

SEQ = 256                                       # documents of 6 sentences: most instances are whole documents
SHORT = ["--max-seq-length", str(SEQ), "--short-seq-prob", "0.3"]          # so rows hold 1 to 3 of them


def run(corpus, out, vocab, *extra):
    assert main(["pretraining-data", corpus, "--out", str(out), "--vocab", vocab, *FLAGS, *SHORT, *extra]) == 0
    return sorted(out.parent.glob(f"{out.name}-*-of-*.tfrecord"))


def read(path, spec) -> dict:
    batches = [tf.io.parse_example(b, spec) for b in tf.data.TFRecordDataset(str(path)).batch(256)]
    return {name: np.concatenate([b[name].numpy() for b in batches]) for name in spec}


@pytest.fixture(scope="module")
def corpus_and_runs(minilm_vocab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("packed")
    corpus = write_corpus(tmp / "corpus.txt", small_documents())
    return (corpus, run(corpus, tmp / "plain", minilm_vocab, "--workers", "1"),
            run(corpus, tmp / "packed", minilm_vocab, "--workers", "1", "--pack"))


def test_packed_shards_hold_the_unpacked_shards_instances(corpus_and_runs):
    """Each packed shard, unpacked, is the unpacked shard's instances in the order pack_lengths deals them."""
    _, plain, packed = corpus_and_runs
    assert len(plain) == len(packed) == 3
    spec = feature_spec(SEQ, PRED)
    total_rows = total_instances = 0
    for plain_path, packed_path in zip(plain, packed):
        instances = read(plain_path, spec)
        rows = pack_lengths(instances["input_mask"].sum(1), SEQ)
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(packed_path))]
        slots = packed_record_slots([str(packed_path)])               # the width the writer chose
        assert slots == packed_prediction_slots(SEQ, PRED, 0.15)
        parsed = {k: v.numpy() for k, v in parse_packed_examples(records, SEQ, slots).items()}
        assert len(records) == len(rows)
        unpacked = unpack_rows(parsed, PRED)
        for name in spec:
            np.testing.assert_array_equal(unpacked[name], instances[name][rows[rows >= 0]], err_msg=name)
        total_rows, total_instances = total_rows + len(rows), total_instances + len(instances["input_ids"])
    assert total_instances / total_rows > 1.5


def test_two_workers_write_the_packed_bytes_one_worker_writes(corpus_and_runs, minilm_vocab, tmp_path):
    corpus, _, packed = corpus_and_runs
    two = run(corpus, tmp_path / "two", minilm_vocab, "--workers", "2", "--pack")
    assert [p.read_bytes() for p in two] == [p.read_bytes() for p in packed]


def test_the_trainers_record_check_names_packed_files(corpus_and_runs):
    _, _, packed = corpus_and_runs
    with pytest.raises(ValueError, match="holds packed rows .pretraining-data --pack."):
        check_records(packed[:1], SEQ, PRED)


@pytest.mark.beam
@pytest.mark.skipif(importlib.util.find_spec("apache_beam") is None, reason="needs the [beam] extra")
def test_beam_direct_runner_writes_the_local_packed_bytes(corpus_and_runs, minilm_vocab, tmp_path):
    corpus, _, packed = corpus_and_runs
    beam = run(corpus, tmp_path / "beam", minilm_vocab, "--pack", "--runner", "DirectRunner",
               "--direct_running_mode=multi_processing", "--direct_num_workers=2")
    assert [p.read_bytes() for p in beam] == [p.read_bytes() for p in packed]
