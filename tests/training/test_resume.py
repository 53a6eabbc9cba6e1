"""Resuming a killed run (bert_keras/training/resume.py): a resume point is committed by its state.json alone, so
new weights beside an old step never load; a fine-tuning run stopped after an epoch and rerun ends with the
weights, losses and scores of the run that was never stopped (the same batches and dropout masks), and a rerun
with other settings is refused by name."""

import json

import keras
import numpy as np
import pytest

from bert_keras.finetune import FinetuneConfig, finetune
from bert_keras.training.resume import read_resume_point, restore_resume_point, save_resume_point
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
