"""`finetune`, `pretraining-data`, `pretrain` and `export` with every path on a file system that is not POSIX:
TensorFlow's `ram://` (tf.io.gfile's in-memory file system, standing in for `gs://`: objects, no folder rename).

Each run is stopped at a step the test draws (KeyboardInterrupt raised after that step, or while a resume point is
being uploaded), then the same command resumes it; the run ends with the weights of an uninterrupted run on the
bucket, bit for bit, and the export on the bucket loads and answers on TF Serving's path (the TF1 loader and
`Session::run`, which reads `ram://` through the same gfile layer as `gs://`). `ram://` lives in this process, so
the stops are in-process; tests/finetune/test_resume_kill.py kills local runs with SIGKILL."""

import json
import random
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras  # noqa: F401  (registers the models for load_model)
from bert_keras import storage
from bert_keras.pretraining import trainer as pretraining_trainer
from bert_keras.training import resume
from bert_keras_cli.main import main
from conftest import FIXTURES
from synthetic_data import sst2_file

pytestmark = pytest.mark.integration

gfile = tf.io.gfile
SAVE_EVERY, PER_EPOCH = 4, 6                # 48 examples in batches of 8, 2 epochs


@pytest.fixture(scope="module")
def bucket(minilm_vocab, tmp_path_factory):
    """A `ram://` folder holding the inputs: SST-2-style train.tsv and the vocabulary."""
    root = f"ram://bucket-{uuid.uuid4().hex[:8]}"
    local = tmp_path_factory.mktemp("inputs")
    gfile.makedirs(f"{root}/data")
    gfile.copy(str(sst2_file(local / "train.tsv", 48)), f"{root}/data/train.tsv")
    gfile.copy(minilm_vocab, f"{root}/data/vocab.txt")
    gfile.copy(str(FIXTURES / "pretraining_corpus.txt"), f"{root}/data/corpus.txt")
    yield root
    storage.rmtree(root)


def _stop_after_step(monkeypatch, callback_class, step_of, at: int):
    """Raises KeyboardInterrupt once `step_of(callback)` reaches `at` after a training step (the run's stop)."""
    original = callback_class.on_train_batch_end

    def on_train_batch_end(self, batch, logs=None):
        original(self, batch, logs)
        if step_of(self) >= at:
            raise KeyboardInterrupt
    monkeypatch.setattr(callback_class, "on_train_batch_end", on_train_batch_end)


def _partial_objects(root: str) -> list[str]:
    return [f"{top}/{name}" for top, _, names in gfile.walk(root) for name in names if ".partial-" in name]


def _weights(path: str) -> list:
    return [np.asarray(w) for w in keras.models.load_model(storage.local_copy(path)).weights]


def test_finetune_on_a_bucket_stops_resumes_and_serves(bucket, monkeypatch, capsys):
    def flags(out):
        return ["finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", f"{bucket}/data/vocab.txt",
                "--train", f"{bucket}/data/train.tsv", "--eval", f"{bucket}/data/train.tsv", "--epochs", "2",
                "--batch-size", "8", "--learning-rate", "1e-3", "--max-seq-length", "32", "--save-every",
                str(SAVE_EVERY), "--quiet", "--out", out]
    whole, stopped = f"{bucket}/runs/whole", f"{bucket}/runs/stopped"
    assert main(flags(whole)) == 0
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    at = rng.choice([5, 6])              # after the point at step 4 (mid-epoch), before epoch 1's at its end (6)
    with monkeypatch.context() as patch:
        _stop_after_step(patch, resume.ResumeCheckpoint, lambda c: c.step, at)
        assert main(flags(stopped)) == 130, seed        # interrupted
    state = json.loads(gfile.GFile(f"{stopped}/backup/state.json").read())
    assert state["step"] == SAVE_EVERY and state["batch"] == SAVE_EVERY and state["epoch"] == 0, (seed, state)
    # Stopped again while the next point's state.json is being uploaded: the point at step 4 stays the one named.
    with monkeypatch.context() as patch:
        real_upload = storage.upload_file

        def upload(local, target):
            if target.endswith("/backup/state.json"):
                raise KeyboardInterrupt
            real_upload(local, target)
        patch.setattr(storage, "upload_file", upload)
        assert main(flags(stopped)) == 130
    assert json.loads(gfile.GFile(f"{stopped}/backup/state.json").read())["step"] == SAVE_EVERY
    assert not _partial_objects(bucket) and not gfile.exists(f"{stopped}/model.keras")
    capsys.readouterr()
    assert main(flags(stopped)) == 0
    assert f"resumed at step {SAVE_EVERY}: batch {SAVE_EVERY} of {PER_EPOCH} in epoch 1" in capsys.readouterr().out
    ours, theirs = (json.loads(gfile.GFile(f"{run}/metrics.json").read()) for run in (whole, stopped))
    assert theirs["history"] == ours["history"] and len(ours["history"]) == 2
    for a, b in zip(_weights(f"{whole}/model.keras"), _weights(f"{stopped}/model.keras")):
        np.testing.assert_array_equal(a, b, err_msg=f"random seed {seed}, stopped at {at}")
    assert not gfile.exists(f"{stopped}/backup") or not gfile.listdir(f"{stopped}/backup")

    # Export from the bucket to the bucket; TF Serving's path loads the version there and answers as the model.
    serving = f"{bucket}/serving"
    assert main(["export", "--model", stopped, "--base-path", serving, "--name", "sst2"]) == 0
    printed = capsys.readouterr().out
    assert f"--model_config_file={serving}/models.config" in printed and " -v " not in printed
    assert f"base_path: '{serving}/sst2'" in gfile.GFile(f"{serving}/models.config").read()
    from savedmodels.session_bundle import SessionBundle
    bundle = SessionBundle(f"{serving}/sst2/1")
    assert bundle.warmup() >= 1
    texts = ["a charming and often affecting journey .", "the plot is thin"]
    served = bundle.run("serving_default", {"text": texts})
    model = keras.models.load_model(storage.local_copy(f"{stopped}/model.keras"))
    np.testing.assert_allclose(served["logits"], model.predict(texts, verbose=0), atol=1e-5)
    assert not _partial_objects(bucket)


def test_pretraining_data_and_pretrain_on_a_bucket_stop_and_resume(bucket, monkeypatch, capsys):
    records = f"{bucket}/records"
    assert main(["pretraining-data", f"{bucket}/data/corpus.txt", "--vocab", f"{bucket}/data/vocab.txt", "--out",
                 f"{records}/corpus", "--shards", "2", "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                 "--dupe-factor", "2", "--quiet"]) == 0
    shards = sorted(gfile.glob(f"{records}/*.tfrecord"))
    assert len(shards) == 2 and not _partial_objects(bucket)
    assert sum(1 for _ in tf.data.TFRecordDataset(shards)) > 16

    def flags(out):
        return ["pretrain", "--model", "bert_tiny", "--vocab", f"{bucket}/data/vocab.txt", "--records", records,
                "--out", out, "--train-steps", "6", "--save-every", "2", "--batch-size", "8", "--max-seq-length",
                "32", "--max-predictions-per-seq", "5", "--learning-rate", "1e-3", "--warmup-steps", "2", "--quiet"]
    whole, stopped = f"{bucket}/pretrain/whole", f"{bucket}/pretrain/stopped"
    assert main(flags(whole)) == 0
    steps = {"n": 0}

    def count(self, batch, logs=None):
        steps["n"] += 1
        if steps["n"] == 3:                             # after the point at step 2, before step 4's
            raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(pretraining_trainer.StepCheckpoint, "on_train_batch_end", count, raising=False)
        assert main(flags(stopped)) == 130
    assert json.loads(gfile.GFile(f"{stopped}/checkpoint/state.json").read())["step"] == 2
    capsys.readouterr()
    assert main(flags(stopped)) == 0
    assert "resumed from step 2 " in capsys.readouterr().out
    for a, b in zip(_weights(f"{whole}/pretrainer.keras"), _weights(f"{stopped}/pretrainer.keras")):
        np.testing.assert_array_equal(a, b)
    assert gfile.exists(f"{stopped}/tf1_checkpoint/bert_model.ckpt.index") and not _partial_objects(bucket)
    # The TF1 checkpoint on the bucket reads (tf.train.load_checkpoint would take ram://'s prefix for a folder).
    reader = tf.compat.v1.train.NewCheckpointReader(f"{stopped}/tf1_checkpoint/bert_model.ckpt")
    assert "bert/embeddings/word_embeddings" in reader.get_variable_to_shape_map()
