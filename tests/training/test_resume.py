"""Resuming a killed run (bert_keras/training/resume.py): a resume point is committed by its state.json alone, so
new weights beside an old step never load; a fine-tuning run stopped after an epoch and rerun ends with the
weights, losses and scores of the run that was never stopped (the same batches and dropout masks), and a rerun
with other settings is refused by name."""

import json

import keras
import numpy as np
import pytest

from bert_keras.finetune import FinetuneConfig, finetune
from bert_keras.training.resume import (finished_run, read_resume_point, restore_resume_point, run_folder,
                                        save_resume_point)
from synthetic_data import sst2_file


def small_model():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Dropout(0.5, seed=1)(inputs)))
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def test_a_point_is_committed_by_its_state_file_alone(tmp_path):
    model = small_model()
    first = [w.copy() for w in model.get_weights()]
    save_resume_point(model, tmp_path, 1, {"step": 1})
    model.set_weights([w + 1 for w in first])
    # A kill after the next point's weights were written, before its state.json: the point on disk is still 1.
    model.save_weights(tmp_path / "weights-2.weights.h5")
    other = small_model()
    assert restore_resume_point(other, tmp_path)["step"] == 1
    for got, want in zip(other.get_weights(), first):
        np.testing.assert_array_equal(got, want)
    save_resume_point(model, tmp_path, 2, {"step": 2})           # committed: the older weights file is removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "weights-2.weights.h5"]
    assert restore_resume_point(small_model(), tmp_path / "none") is None


def test_a_damaged_point_names_the_fix(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"step": 3, "weights": "weights-3.weights.h5"}))
    with pytest.raises(FileNotFoundError, match="weights-3.weights.h5, which is missing.*delete"):
        read_resume_point(tmp_path)


class StopAfterFirstEpoch(keras.callbacks.Callback):
    """Stands for a kill right after the first epoch's resume point is written (it runs after finetune's own)."""

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            raise KeyboardInterrupt


def test_a_stopped_fine_tuning_run_resumes_to_the_uninterrupted_weights(minilm_vocab, tmp_path, capsys):
    train = sst2_file(tmp_path / "train.tsv", 70)              # 5 batches of 16, the last partial

    def config(out, **changes):
        return FinetuneConfig(**{**dict(task="sst-2", model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / out),
                                        train=str(train), eval=str(train), epochs=3, batch_size=16,
                                        learning_rate=1e-3, max_seq_length=64, progress=False), **changes})
    whole = finetune(config("whole"))
    with pytest.raises(KeyboardInterrupt):
        finetune(config("stopped"), callbacks=[StopAfterFirstEpoch()])
    assert read_resume_point(str(tmp_path / "stopped" / "backup"))["epoch"] == 1
    with pytest.raises(ValueError, match=r"holds an unfinished run with other settings \(learning_rate, seed\)"):
        finetune(config("stopped", learning_rate=2e-3, seed=1))
    capsys.readouterr()
    resumed = finetune(config("stopped"))
    assert "resumed after epoch 1" in capsys.readouterr().out
    # Without the skipped batches or the dropout seeds the second epoch's loss already differs (by ~3e-3).
    assert resumed["loss"] == whole["loss"] and resumed["history"] == whole["history"]
    for a, b in zip(whole["model"].get_weights(), resumed["model"].get_weights()):
        np.testing.assert_array_equal(a, b)
    record = json.loads((tmp_path / "stopped" / "metrics.json").read_text())
    assert [e["epoch"] for e in record["history"]] == [1, 2, 3] and len(record["timing"]["epochs"]) == 3
    assert not (tmp_path / "stopped" / "backup").exists()         # removed once model.keras is saved


class StopAtStep(keras.callbacks.Callback):
    """Stands for a kill after training step `step` (it runs after finetune's own callbacks, so after a point saved
    at that step)."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == self.step:
            raise KeyboardInterrupt


def test_a_run_stopped_mid_epoch_resumes_at_its_step(minilm_vocab, tmp_path, capsys, monkeypatch):
    """--save-every 2 over epochs of 5 batches: stopped at step 9 (batch 4 of epoch 2), the last point is step 8;
    the rerun goes on from batch 3 of epoch 2 and ends with the weights, epoch losses and scores of the whole run
    (the running loss of the interrupted epoch is kept, so its mean is over all its batches). The rerun saves after
    every step by time (SAVE_SECONDS 0): when points are saved changes nothing in the weights."""
    import bert_keras.finetune.trainer
    train = sst2_file(tmp_path / "train.tsv", 70)              # 5 batches of 16, the last partial

    def config(out, **changes):
        return FinetuneConfig(**{**dict(task="sst-2", model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / out),
                                        train=str(train), eval=str(train), epochs=3, batch_size=16,
                                        learning_rate=1e-3, max_seq_length=64, progress=False, save_every=2),
                                 **changes})
    whole = finetune(config("whole", save_every=None))           # no point within an epoch: the same weights
    with pytest.raises(KeyboardInterrupt):
        finetune(config("stopped"), callbacks=[StopAtStep(9)])
    point = read_resume_point(str(tmp_path / "stopped" / "backup"))
    assert (point["step"], point["epoch"], point["batch"]) == (8, 1, 3)
    capsys.readouterr()
    monkeypatch.setattr(bert_keras.finetune.trainer, "SAVE_SECONDS", 0)
    resumed = finetune(config("stopped", save_every=3))          # another interval: not a setting of the run
    assert "resumed at step 8: batch 3 of 5 in epoch 2" in capsys.readouterr().out
    assert resumed["loss"] == whole["loss"] and resumed["history"] == whole["history"]
    for a, b in zip(whole["model"].get_weights(), resumed["model"].get_weights()):
        np.testing.assert_array_equal(a, b)


def test_the_task_models_fit_resumes_at_its_step(minilm_vocab, tmp_path, capsys):
    """fit(resume=folder) on raw text, as the notebook runs it: stopped at step 7 (a point at step 6, batch 1 of
    epoch 2) and fitted again on a model built the same way, it ends with the weights of the fit never stopped,
    and removes its folder."""
    from bert_keras import PRESETS, BertEncoder, BertPreprocessor
    from bert_keras.tasks import BertClassifier
    texts = [f"review number {i} was {'good' if i % 2 else 'bad'} and {'long' if i % 3 else 'short'}"
             for i in range(40)]
    labels = np.array([i % 2 for i in range(40)], "int32")

    def model():
        keras.utils.set_random_seed(0)
        classifier = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2,
                                    preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=32))
        classifier.compile(optimizer=keras.optimizers.Adam(1e-3), metrics=["accuracy"],
                           loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return classifier

    def fit(classifier, folder, **args):
        return classifier.fit(texts, labels, batch_size=8, epochs=2, verbose=0, resume=str(tmp_path / folder),
                              save_every=2, **args)
    whole = model()
    losses = fit(whole, "whole").history["loss"]
    with pytest.raises(KeyboardInterrupt):
        fit(model(), "stopped", callbacks=[StopAtStep(7)])
    assert read_resume_point(str(tmp_path / "stopped"))["step"] == 6
    capsys.readouterr()
    resumed = model()
    history = fit(resumed, "stopped").history
    assert "resumed at step 6" in capsys.readouterr().out
    assert history["loss"] == losses[1:]           # the second epoch's mean, over its batches before the stop too
    for a, b in zip(whole.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not (tmp_path / "stopped").exists() and not (tmp_path / "whole").exists()


def test_a_run_folder_is_new_unfinished_or_finished(tmp_path):
    """run_folder: a file or a finished run is refused (overwrite deletes the old run's outputs and goes on); a
    folder the run created is removed when the run fails before its first resume point, kept after one."""
    outputs = ("model.keras", "metrics.json", "logs", "backup")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(FileExistsError, match="a_file is a file"):
        with run_folder(str(tmp_path / "a_file"), str(tmp_path / "a_file" / "backup"), "model.keras", outputs):
            pass
    run = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_folder(str(run), str(run / "backup"), "model.keras", outputs):
            run.mkdir()
            (run / "logs").mkdir()
            raise RuntimeError("refused before the first epoch")
    assert not run.exists()                                       # created by the refused run: removed
    with pytest.raises(KeyboardInterrupt):
        with run_folder(str(run), str(run / "backup"), "model.keras", outputs):
            (run / "backup").mkdir(parents=True)
            (run / "backup" / "state.json").write_text(json.dumps({"epoch": 1, "weights": "w"}))
            raise KeyboardInterrupt                               # killed after a resume point: kept
    assert (run / "backup" / "state.json").exists() and not finished_run(str(run), "model.keras", str(run / "backup"))
    (run / "model.keras").write_text("saved")                     # killed between saving and removing backup/
    assert not finished_run(str(run), "model.keras", str(run / "backup"))
    (run / "backup" / "state.json").unlink()
    assert finished_run(str(run), "model.keras", str(run / "backup"))
    with pytest.raises(FileExistsError, match="holds a finished run .*--overwrite"):
        with run_folder(str(run), str(run / "backup"), "model.keras", outputs):
            pass
    (run / "notes.txt").write_text("the user's own")
    with run_folder(str(run), str(run / "backup"), "model.keras", outputs, overwrite=True):
        assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]     # the run's outputs only were deleted
    # A run that keeps its last resume point (pretraining) is finished when that point is at its last step.
    (run / "backup").mkdir()
    (run / "backup" / "state.json").write_text(json.dumps({"step": 2}))
    assert finished_run(str(run), "notes.txt", str(run / "backup"), done=4) is False
    assert finished_run(str(run), "notes.txt", str(run / "backup"), done=2) is True
