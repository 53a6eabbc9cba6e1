"""`bert-keras finetune` end to end on slices of the real data sets: real MiniLM weights on SST-2 must learn;
a tiny random model on every other task kind must fit its training slice (loss falls, metric above chance)."""

import io
import json
import subprocess
import sys
import warnings
import zipfile

import h5py
import keras

import pytest

from bert_keras_cli.main import main
from conftest import REPO


def run(args, capsys):
    code = main(["finetune", "--quiet", *args])
    return code, capsys.readouterr()


@pytest.mark.integration
def test_sst2_with_real_weights_learns_and_reloads(minilm_dir, shared_data, tmp_path, capsys):
    out = tmp_path / "sst2"
    code, _ = run(["--task", "sst-2", "--model", minilm_dir, "--data", str(shared_data / "SST-2"), "--out", str(out),
                   "--epochs", "2", "--batch-size", "32", "--learning-rate", "1e-4", "--max-train-examples", "640",
                   "--max-eval-examples", "200"], capsys)
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["final"]["accuracy"] > 0.65          # chance: 0.52 (200 dev sentences, 104 positive)
    assert metrics["history"][-1]["accuracy"] >= metrics["history"][0]["accuracy"]
    assert (out / "training_curves.png").stat().st_size > 1000 and any((out / "logs").rglob("*tfevents*"))
    # One file: the saved task model reopens in a fresh process (safe_mode), takes raw text and predicts what the
    # run measured.
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == ["metrics.json", "model.keras",
                                                                    "training_curves.png"]
    # model.keras holds the model, not the optimizer's moments (resume state lives in backup/ while training).
    with zipfile.ZipFile(out / "model.keras") as archive, archive.open("model.weights.h5") as f:
        with h5py.File(io.BytesIO(f.read()), "r") as h5:
            assert "optimizer" not in h5 and "layers" in h5
    script = f"""
import keras, numpy as np, bert_keras
from bert_keras.data import read_glue
model = keras.models.load_model({str(out / 'model.keras')!r}, safe_mode=True)
examples, _ = read_glue("sst-2", {str(shared_data / 'SST-2' / 'dev.tsv')!r})
examples = examples[:200]
logits = model.predict([e.text_a for e in examples], batch_size=50, verbose=0)
print((logits.argmax(-1) == np.array([e.label for e in examples])).mean())
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.split()[-1]) == pytest.approx(metrics["final"]["accuracy"], abs=1e-9)


@pytest.mark.parametrize("task,data,chance", [
    ("squad", ["--train", "squad/train-split-v1.1.json", "--eval", "squad/train-split-v1.1.json"], 5.0),
    # 4-way softmax: chance is 0.25; the loss leaves log(4) slowly while accuracy on the slice climbs fast.
    ("openbookqa", ["--train", "openbookqa/dev.jsonl", "--eval", "openbookqa/dev.jsonl"], 0.5),
    ("conll2003", ["--train", "conll2003/valid.txt", "--eval", "conll2003/valid.txt"], 0.0),
])
@pytest.mark.integration
def test_tiny_model_fits_each_task_kind(minilm_vocab, shared_data, tmp_path, capsys, task, data, chance):
    from bert_keras.finetune import FinetuneConfig, finetune
    paths = {"train": str(shared_data / data[1]), "eval": str(shared_data / data[3])}
    seen = Seen()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = finetune(FinetuneConfig(task=task, model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / task),
                                         epochs=5, batch_size=16, learning_rate=2e-3, max_train_examples=60,
                                         max_eval_examples=64, max_seq_length=128, progress=False, **paths),
                          callbacks=[seen])
    # No warning caused by the library's own calls: the tf.data input is shuffled already, and the pooler that
    # SQuAD's and CoNLL's heads do not read is not trained (so it has no gradient to miss).
    assert not [str(w.message) for w in caught if "shuffle" in str(w.message) or "Gradients do not" in str(w.message)]
    loss = result["loss"]
    assert loss[-1] < 0.9 * loss[0], loss
    assert result["metrics"][FINAL[task]] > chance
    # The hooks: an extra callback runs after the evaluation (it sees the metric in the epoch's logs), and the
    # run's timings are recorded, per epoch too.
    assert seen.began and len(seen.epochs) == 5 and all(f"eval_{FINAL[task]}" in logs for logs in seen.epochs)
    assert [e["epoch"] for e in result["timing"]["epochs"]] == [1, 2, 3, 4, 5]
    saved = json.loads((tmp_path / task / "metrics.json").read_text())
    assert saved["timing"] == result["timing"] and saved["timing"]["eval_seconds"] > 0
    # 60 examples (SQuAD: their windows) at batch 16 on a CPU: the last partial batch is trained on too.
    assert saved["steps_per_epoch"] == -(-saved["training_sequences"] // 16) and not saved["dropped_last_batch"]
    if task == "squad":        # the official scripts' input: {question id: answer text} for every evaluated question
        predictions = json.loads((tmp_path / task / "predictions.json").read_text())
        assert len(predictions) == 64 and all(isinstance(v, str) for v in predictions.values())


FINAL = {"squad": "f1", "openbookqa": "accuracy", "conll2003": "f1"}


class Seen(keras.callbacks.Callback):
    """Records what an extra callback passed to finetune sees."""

    def __init__(self):
        super().__init__()
        self.began, self.epochs = False, []

    def on_train_begin(self, logs=None):
        self.began = True

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(dict(logs or {}))


def test_bad_input_is_named(tmp_path, capsys, minilm_vocab):
    code, captured = run(["--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
                          "--train", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "no such file" in captured.err and "missing.tsv" in captured.err
    code, captured = run(["--task", "nope", "--model", "bert_tiny", "--vocab", minilm_vocab,
                          "--train", minilm_vocab, "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "unknown task 'nope'" in captured.err and "sst-2" in captured.err
    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\tlabel\n" + "good .\t1\nbad .\t0\n" * 40)
    code, captured = run(["--task", "sst-2", "--model", "bert_tiny", "--train", str(tsv), "--out", str(tmp_path / "o")],
                         capsys)
    assert code == 2 and "--vocab" in captured.err
