"""Several processes as one JAX run, as a TPU pod slice's hosts run (issue 41): `bert-keras finetune --backend jax`
and `bert-keras pretrain --backend jax` started as 2 processes of 4 simulated CPU devices each, joined by Keras' own
variables (KERAS_DISTRIBUTION_JOB_ADDRESSES / NUM_PROCESSES / PROCESS_ID: jax.distributed, CPU collectives over
gloo), train the weights that one process over 8 devices trains at the same global batch: each process reads the
same host pipeline and keeps its slice of every global batch (training.data_parallel.local_batches). Process 0
writes the run folder (which loads in this TensorFlow process), process 1 only `process-1/` inside it."""

import json
import os
import socket
import subprocess

import keras
import numpy as np
import pytest

import bert_keras  # noqa: F401  (registers the models for load_model)
from conftest import REPO, pretraining_records
from test_jax_cli import BERT_KERAS, jax_env, pretrain_command, separable_sst2

pytestmark = pytest.mark.jax


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def run_processes(args: list, processes: int, timeout: float = 1200) -> list[str]:
    """`bert-keras *args` as `processes` processes of 8 / processes devices each -> their outputs."""
    port = free_port()
    started = []
    for index in range(processes):
        env = jax_env(8 // processes)
        if processes > 1:
            env.update(KERAS_DISTRIBUTION_JOB_ADDRESSES=f"localhost:{port}",
                       KERAS_DISTRIBUTION_NUM_PROCESSES=str(processes), KERAS_DISTRIBUTION_PROCESS_ID=str(index))
        started.append(subprocess.Popen([BERT_KERAS, *map(str, args)], cwd=REPO, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = []
    try:
        for process in started:
            outputs.append(process.communicate(timeout=timeout)[0])
            assert process.returncode == 0, outputs[-1][-5000:]
    finally:
        for process in started:
            process.kill()
    return outputs


def weights(path):
    return [np.asarray(w) for w in keras.models.load_model(path).weights]


def assert_one_run(one, two, saved: str) -> None:
    """The 2-process run `two` trained what the 1-process run `one` trained, and wrote as it did (process 1: only
    inside process-1/, which it names by its JAX process index, so it did join)."""
    for a, b in zip(weights(one / saved), weights(two / saved), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6, rtol=0)
    assert {p.name for p in two.iterdir()} == {p.name for p in one.iterdir()} | {"process-1"}
    assert (two / "process-1" / saved).is_file()


def test_finetune_over_two_processes_trains_what_one_process_trains(minilm_vocab, tmp_path):
    flags = ["finetune", "--backend", "jax", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
             "--train", separable_sst2(tmp_path / "train.tsv", 0, n=96), "--eval",
             separable_sst2(tmp_path / "dev.tsv", 1, n=37), "--epochs", 3, "--batch-size", 16, "--learning-rate",
             2e-3, "--max-seq-length", 32, "--quiet"]
    one, two = tmp_path / "one", tmp_path / "two"
    run_processes([*flags, "--out", one], 1)
    printed = run_processes([*flags, "--out", two], 2)
    assert_one_run(one, two, "model.keras")
    one_record, two_record = (json.loads((run / "metrics.json").read_text()) for run in (one, two))
    for record, processes in ((one_record, 1), (two_record, 2)):
        assert record["host"]["devices"] == "cpu x 8" and record["host"]["replicas"] == 8
        assert record["host"]["processes"] == processes
    assert two_record["history"] == one_record["history"]                     # the evaluation after each epoch
    assert one_record["history"][-1]["accuracy"] > 0.8, one_record["history"]  # it learned: the weights mean something
    assert all("Traceback" not in out for out in printed)


def test_pretrain_over_two_processes_trains_what_one_process_trains(minilm_vocab, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    pretraining_records(minilm_vocab, records, 2, 3)
    one, two = tmp_path / "one", tmp_path / "two"
    run_processes(pretrain_command(minilm_vocab, records, one, steps=20), 1)
    run_processes(pretrain_command(minilm_vocab, records, two, steps=20), 2)
    assert_one_run(one, two, "pretrainer.keras")


def test_each_process_keeps_its_slice_of_every_global_batch(monkeypatch):
    """local_batches: process i of n keeps rows [i B / n, (i + 1) B / n) of each global batch of every part of an
    element (ids dict and targets), so the processes' slices make up the global batch once (fed whole by every
    process, a batch would count each example n times, which the weights above cannot show: its mean gradient is
    the same)."""
    import jax
    import tensorflow as tf

    from bert_keras.training.data_parallel import local_batches
    ids = np.arange(4 * 16 * 3).reshape(4 * 16, 3)
    data = tf.data.Dataset.from_tensor_slices(({"input_word_ids": ids}, np.arange(4 * 16))).batch(16)
    seen = []
    for index in range(2):
        monkeypatch.setattr(jax, "process_count", lambda: 2)
        monkeypatch.setattr(jax, "process_index", lambda index=index: index)
        seen.append(list(local_batches(data, 16).as_numpy_iterator()))
    for (x0, y0), (x1, y1), (x, y) in zip(*seen, data.as_numpy_iterator(), strict=True):
        np.testing.assert_array_equal(np.concatenate([x0["input_word_ids"], x1["input_word_ids"]]), x["input_word_ids"])
        np.testing.assert_array_equal(np.concatenate([y0, y1]), y)
        assert len(y0) == len(y1) == 8
    with pytest.raises(ValueError, match="does not divide over 2 processes"):
        local_batches(data, 15)


def test_one_device_is_refused_in_a_run_of_several_processes(monkeypatch):
    """--strategy cpu would train each process on its own slice alone: a clear error instead."""
    import jax

    from bert_keras.training.data_parallel import start_data_parallel
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with pytest.raises(ValueError, match="--strategy cpu trains on one device, but this run has 2 processes"):
        start_data_parallel("cpu", 16)
