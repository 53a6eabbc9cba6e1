"""The command line on the JAX route (issue 41, item 4): `bert-keras finetune --backend jax` for every task kind
and `bert-keras pretrain --backend jax` from records and from raw text, data parallel over 8 simulated devices by
default; metrics.json records the backend; a fine-tuning run killed with -9 mid-epoch and a pretraining run
killed with -9 resume to the uninterrupted weights; the files load in a TensorFlow process."""

import json
import os
import pathlib
import subprocess
import sys

import keras

import bert_keras  # noqa: F401  (registers the models for load_model)
import numpy as np
import pytest

from conftest import REPO, kill_after_checkpoint, pretraining_records
from synthetic_data import sst2_file

pytestmark = pytest.mark.jax

BERT_KERAS = str(pathlib.Path(sys.executable).parent / "bert-keras")


def jax_env(devices=8):
    """No KERAS_BACKEND: `--backend jax` alone must choose the backend."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    return {**env, "TF_CPP_MIN_LOG_LEVEL": "3", "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}


def cli(*args, timeout=1200):
    run = subprocess.run([BERT_KERAS, *map(str, args)], capture_output=True, text=True, cwd=REPO, env=jax_env(),
                         timeout=timeout)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return run.stdout


TASKS = {  # task: (data flags relative to ../shared/data or None for the synthetic SST-2, metric, above this)
    "sst-2": (None, "accuracy", 0.8),
    "squad": (["--train", "squad/train-split-v1.1.json", "--eval", "squad/train-split-v1.1.json"], "f1", 5.0),
    "openbookqa": (["--train", "openbookqa/dev.jsonl", "--eval", "openbookqa/dev.jsonl"], "accuracy", 0.3),
    "conll2003": (["--train", "conll2003/valid.txt", "--eval", "conll2003/valid.txt"], "f1", 0.0),
}


def separable_sst2(path, seed, n=64):
    """An SST-2 TSV whose label a tiny random model can learn in a few steps: label 1 sentences are made of one
    set of words, label 0 of another."""
    rng = np.random.default_rng(seed)
    sets = ["river stone light music garden winter paper".split(), "market silver forest engine letter storm".split()]
    lines = [" ".join(rng.choice(sets[i % 2], size=3 + i % 4)) + f"\t{i % 2}" for i in range(n)]
    path.write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("task", list(TASKS))
def test_finetune_each_task_kind_on_jax(task, minilm_vocab, tmp_path):
    from conftest import shared_data_dir
    flags, metric, above = TASKS[task]
    model = ["--model", "bert_tiny", "--vocab", minilm_vocab, "--epochs", 5, "--batch-size", 16, "--learning-rate",
             2e-3, "--max-train-examples", 64, "--max-eval-examples", 48]
    if flags is None:
        flags = ["--train", separable_sst2(tmp_path / "train.tsv", 0), "--eval", separable_sst2(tmp_path / "dev.tsv", 1)]
    else:
        if shared_data_dir() is None:
            pytest.skip("../shared/data is not on this machine")
        flags = [flags[0], shared_data_dir() / flags[1], flags[2], shared_data_dir() / flags[3]]
    out = tmp_path / "run"
    printed = cli("finetune", "--backend", "jax", "--task", task, *model, *flags, "--out", out,
                         "--max-seq-length", 128, "--quiet")
    record = json.loads((out / "metrics.json").read_text())
    assert record["config"]["backend"] == "jax" and record["host"]["backend"] == "jax"
    assert record["host"]["devices"] == "cpu x 8" and record["host"]["replicas"] == 8
    assert record["versions"]["jax"]
    assert record["final"][metric] > above, record["history"]
    assert 'final: {"epoch": ' in printed
    # The file this JAX run wrote loads in this TensorFlow process and answers.
    model = keras.models.load_model(out / "model.keras")
    assert keras.backend.backend() == "tensorflow" and model.preprocessor is not None


def test_finetune_on_jax_resumes_after_kill_9(minilm_vocab, tmp_path):
    """Killed with -9 within an epoch, after a --save-every point, and run again: it resumes at that step and ends
    with the weights, losses and scores of the run that was never killed (the same batches and dropout masks, on 8
    devices)."""
    train = separable_sst2(tmp_path / "train.tsv", 0, n=128)

    def command(out):                        # 8 steps an epoch; points at 3, 6, 8, 9, 12, 15, 16, ...
        return ["finetune", "--backend", "jax", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
                "--train", train, "--eval", train, "--epochs", 6, "--batch-size", 16, "--learning-rate", 1e-3,
                "--max-seq-length", 64, "--out", out, "--quiet", "--save-every", 3]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    cli(*command(whole))
    process = subprocess.Popen([BERT_KERAS, *map(str, command(killed))], cwd=REPO, env=jax_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at = kill_after_checkpoint(process, killed / "backup" / "state.json", 9, timeout=900)
    point = json.loads((killed / "backup" / "state.json").read_text())
    assert 9 <= killed_at < 48 and 0 < point["batch"] == killed_at - 8 * point["epoch"]    # (seen before step 16)
    assert not (killed / "model.keras").exists()
    printed = cli(*command(killed))
    assert f"resumed at step {killed_at}: batch {point['batch']} of 8 in epoch {point['epoch'] + 1} " in printed
    ours, resumed = (json.loads((run / "metrics.json").read_text()) for run in (whole, killed))
    assert resumed["history"] == ours["history"] and len(ours["history"]) == 6
    a, b = (keras.models.load_model(run / "model.keras").get_weights() for run in (whole, killed))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=1e-6, rtol=0)


def pretrain_command(vocab, records, out, steps=40):
    return ["pretrain", "--backend", "jax", "--model", "bert_tiny", "--vocab", vocab, "--records", records,
            "--out", out, "--train-steps", steps, "--save-every", 10, "--batch-size", 16, "--max-seq-length", 64,
            "--max-predictions-per-seq", 10, "--learning-rate", 1e-3, "--warmup-steps", 4, "--quiet"]


def test_pretrain_on_jax_resumes_after_kill_9(minilm_vocab, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    pretraining_records(minilm_vocab, records, 2, 3)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    printed = cli(*pretrain_command(minilm_vocab, records, whole))
    assert "replicas: 8" in printed
    process = subprocess.Popen([BERT_KERAS, *map(str, pretrain_command(minilm_vocab, records, broken))], cwd=REPO,
                               env=jax_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at = kill_after_checkpoint(process, broken / "checkpoint" / "state.json", 20, timeout=900)
    assert 20 <= killed_at < 40 and not (broken / "encoder.keras").exists()
    printed = cli(*pretrain_command(minilm_vocab, records, broken))
    assert f"resumed from step {killed_at} " in printed
    ours = [np.asarray(w) for w in keras.models.load_model(whole / "pretrainer.keras").weights]
    resumed = [np.asarray(w) for w in keras.models.load_model(broken / "pretrainer.keras").weights]
    for a, b in zip(ours, resumed):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_pretrain_on_jax_from_raw_text_feeds_tensorflow_fine_tuning(minilm_vocab, tmp_path):
    from bert_keras.finetune import FinetuneConfig, finetune
    out = tmp_path / "text"
    cli("pretrain", "--backend", "jax", "--model", "bert_tiny", "--vocab", minilm_vocab, "--text",
               REPO / "tests" / "fixtures" / "pretraining_corpus.txt", "--out", out, "--train-steps", 20,
               "--save-every", 10, "--batch-size", 16, "--max-seq-length", 64, "--learning-rate", 1e-3, "--quiet")
    history = sorted(out.glob("logs/train/*tfevents*"))
    assert history and (out / "tf1_checkpoint").is_dir()
    tuned = finetune(FinetuneConfig(task="sst-2", model=str(out / "encoder.keras"), out=str(tmp_path / "ft"),
                                    train=str(sst2_file(tmp_path / "train.tsv")), epochs=1, batch_size=16,
                                    progress=False))
    assert np.isfinite(tuned["loss"][-1])


def test_a_faked_tpu_vm_is_routed_to_jax_and_told_what_to_fix(minilm_vocab, tmp_path):
    """$TPU_ACCELERATOR_TYPE (a TPU VM sign) with this venv's CPU-only JAX and no tensorflow-tpu: without
    --backend or KERAS_BACKEND the command takes Keras' JAX backend, then stops with the fix instead of training on
    the CPU; forced onto TensorFlow it names the JAX route. tensorflow-tpu is never installed on this route."""
    from importlib.metadata import PackageNotFoundError, version
    data = separable_sst2(tmp_path / "train.tsv", 0)
    args = [BERT_KERAS, "finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab, "--train",
            data, "--out", tmp_path / "run", "--quiet"]
    env = {**jax_env(devices=1), "TPU_ACCELERATOR_TYPE": "v5litepod-8"}
    run = subprocess.run(list(map(str, args)), capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Keras' JAX backend" in run.stdout and "v5litepod-8" in run.stdout
    assert "JAX sees no TPU" in run.stderr and "pip install -U 'jax[tpu]'" in run.stderr
    assert not (tmp_path / "run" / "model.keras").exists()
    forced = subprocess.run(list(map(str, args)), capture_output=True, text=True, cwd=REPO, timeout=600,
                            env={**env, "KERAS_BACKEND": "tensorflow"})
    assert forced.returncode == 2 and "--backend jax" in forced.stderr, forced.stderr[-2000:]
    with pytest.raises(PackageNotFoundError):
        version("tensorflow-tpu")
