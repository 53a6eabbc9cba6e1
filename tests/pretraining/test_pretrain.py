"""`bert-keras pretrain` on records made from the shipped corpus: it learns, its outputs feed fine-tuning and load
as google-research checkpoints, a kill -9 mid-run resumes to exactly the uninterrupted weights, and it runs under
MirroredStrategy over two logical CPUs."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from conftest import FIXTURES, REPO, kill_after_checkpoint, pretraining_records, run_workers

pytestmark = pytest.mark.integration          # the pretrain command, kill -9 and resume, several processes

SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def records(minilm_vocab, tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    pretraining_records(minilm_vocab, folder, 2, 3)
    return str(folder)


def command(vocab, records, out, steps=40, *extra):
    return [sys.executable, "-m", "bert_keras_cli.main", "pretrain", "--model", "bert_tiny", "--vocab", vocab,
            "--records", records, "--out", str(out), "--train-steps", str(steps), "--save-every", "10",
            "--batch-size", "16", "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED),
            "--learning-rate", "1e-3", "--warmup-steps", "4", "--quiet", *extra]


def weights(path):
    import bert_keras  # noqa: F401
    return [np.asarray(w) for w in keras.models.load_model(path).weights]


def test_pretraining_learns_and_feeds_fine_tuning(minilm_vocab, records, tmp_path):
    from bert_keras import read_checkpoint
    from bert_keras.finetune import FinetuneConfig, finetune
    from bert_keras.pretraining import PretrainConfig, pretrain
    out = tmp_path / "run"
    result = pretrain(PretrainConfig(model="bert_tiny", vocab=minilm_vocab, out=str(out), records=records,
                                     max_seq_length=SEQ, max_predictions_per_seq=PRED, train_steps=60, save_every=20,
                                     batch_size=16, learning_rate=1e-3, warmup_steps=6, progress=False))
    first, last = result["history"][0], result["history"][-1]
    assert last["loss"] < first["loss"] - 0.5 and last["mlm_accuracy"] > first["mlm_accuracy"]
    assert (out / "training_curves.png").stat().st_size > 1000 and any((out / "logs").rglob("*tfevents*"))
    # The TF1 checkpoint carries the heads under google-research's names, equal to the trained pretrainer's.
    pretrainer = keras.models.load_model(out / "pretrainer.keras")
    _, tensors, _ = read_checkpoint(str(out / "tf1_checkpoint"))
    for name, value in pretrainer.head_weights().items():
        np.testing.assert_array_equal(tensors[name], value)
    # encoder.keras is what fine-tuning takes as --model.
    tuned = finetune(FinetuneConfig(task="sst-2", model=str(out / "encoder.keras"), out=str(tmp_path / "ft"),
                                    train=str(REPO / "bert_keras/data/samples/sst2_train.tsv"), epochs=1,
                                    batch_size=16, max_train_examples=64, progress=False))
    assert np.isfinite(tuned["loss"][-1])


def test_kill_9_then_resume_reaches_the_uninterrupted_weights(minilm_vocab, records, tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    run = subprocess.run(command(minilm_vocab, records, whole), capture_output=True, text=True, cwd=REPO, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    process = subprocess.Popen(command(minilm_vocab, records, broken), cwd=REPO, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at = kill_after_checkpoint(process, broken / "checkpoint" / "state.json", 20, timeout=600)
    assert 20 <= killed_at < 40 and not (broken / "encoder.keras").exists()
    run = subprocess.run(command(minilm_vocab, records, broken), capture_output=True, text=True, cwd=REPO, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"resumed from step {killed_at} " in run.stdout          # not a silent restart from step 0
    for a, b in zip(weights(whole / "pretrainer.keras"), weights(broken / "pretrainer.keras")):
        np.testing.assert_array_equal(a, b)


def test_runs_under_mirrored_strategy_on_two_logical_cpus(minilm_vocab, records, tmp_path):
    script = textwrap.dedent(f"""
        import sys, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from bert_keras_cli.main import main
        sys.exit(main({command(minilm_vocab, records, tmp_path / "mirrored", 20, "--strategy", "mirrored")[3:]!r}))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "replicas: 2" in run.stdout
    last = json.loads(run.stdout.split("step 20: ")[1].splitlines()[0])
    assert np.isfinite(last["loss"]) and last["loss"] < 11


def test_two_workers_on_localhost_agree_on_the_weights(minilm_vocab, records, tmp_path):
    out = tmp_path / "mw"
    for stdout in run_workers(command(minilm_vocab, records, out, 20, "--strategy", "multi_worker")):
        assert "replicas: 2" in stdout
    # The chief writes to --out, the other worker to --out/worker-1; all-reduce keeps their weights identical.
    for a, b in zip(weights(out / "pretrainer.keras"), weights(out / "worker-1" / "pretrainer.keras")):
        np.testing.assert_array_equal(a, b)


def test_dynamic_masking_from_raw_text_learns(minilm_vocab, tmp_path):
    from bert_keras.pretraining import PretrainConfig, pretrain
    result = pretrain(PretrainConfig(model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / "mlm"),
                                     text=str(FIXTURES / "pretraining_corpus.txt"), nsp=False, max_seq_length=SEQ,
                                     max_predictions_per_seq=PRED, train_steps=40, save_every=20, batch_size=16,
                                     learning_rate=1e-3, progress=False))        # warm-up: its default, 4
    first, last = result["history"][0], result["history"][-1]
    assert last["loss"] < first["loss"] - 0.5 and last["mlm_accuracy"] > first["mlm_accuracy"]
    assert "nsp_accuracy" not in last                    # MLM only: no NSP metric reported
