"""Packed fine-tuning (issue 49 item 4; bert_keras/finetune/packed_examples.py): real SST-2 phrases (the samples
shipped in bert_keras/data/samples) through the MiniLM vocab, packed up to 8 a row at length 64, give bert_tiny's
classifier the logits each example gets alone in an ordinary padded row (the functional, unpacked graph: the
reference) and the loss Keras computes on the unpacked batch; letting attention cross the examples of a row (the
mutation) breaks it. The packer: every example in exactly one row, rows within length and count."""

import sys

import keras
import numpy as np
import pytest

from bert_keras.finetune.packed_examples import PackedTraining, example_ids, pack_examples, packed_rows
from bert_keras.finetune.registry import get_task
from bert_keras.loading import load_backbone
from bert_keras.tasks.classifier import packed_loss

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/pretraining")
from packed_batches import crossing_attention  # noqa: E402

SEQ, K, N = 64, 8, 48
SAMPLES = __file__.rsplit("/", 3)[0] + "/bert_keras/data/samples/sst2_train.tsv"


@pytest.fixture(scope="module")
def packed_case(minilm_vocab):
    """bert_tiny's classifier (seed 0) at length 64, N real phrases alone and packed -> a dict of both."""
    keras.utils.set_random_seed(0)
    task = get_task("sst-2")
    examples = task.read(SAMPLES)[:N]
    encoder, preprocessor = load_backbone("bert_tiny", minilm_vocab, seq_length=SEQ, max_seq_length=SEQ)
    model = task.build_model(encoder, preprocessor, examples)
    model.compile(optimizer="sgd", **task.compile_args())
    x, y = task.inputs(examples)
    ids, lengths = example_ids(model, x)
    rows = pack_examples(lengths, SEQ, K)
    packed = packed_rows(ids, lengths, rows)
    alone = {**ids, "input_mask": (np.arange(SEQ) < lengths[:, None]).astype("int32")}
    return {"model": model, "task": task, "examples": examples, "x": x, "y": y, "ids": ids, "alone": alone,
            "lengths": lengths, "rows": rows, "packed": packed}


def packed_logits(case) -> np.ndarray:
    """The packed rows' logits [R, K, C] gathered back to example order [N, C]."""
    out = keras.ops.convert_to_numpy(case["model"](case["packed"], training=False))
    rows = case["rows"]
    logits = np.zeros((len(case["lengths"]), out.shape[-1]), "float32")
    logits[rows[rows >= 0]] = out[rows >= 0]
    return logits


def test_the_packer_places_every_example_once_within_length_and_count(packed_case):
    rows, lengths = packed_case["rows"], packed_case["lengths"]
    assert sorted(rows[rows >= 0].tolist()) == list(range(N))
    assert (np.where(rows >= 0, lengths[np.maximum(rows, 0)], 0).sum(1) <= SEQ).all()
    assert rows.shape[1] == K and len(rows) < N / 2 and ((rows >= 0).sum(1) >= 3).any()   # several a row
    assert pack_examples([3, 1, 4, 1], 5, 3).tolist() == [[0, 3, -1], [1, 2, -1]]
    with pytest.raises(ValueError, match="max_seq_length"):
        pack_examples([3, 9], 5, 3)


def test_packed_logits_and_loss_equal_each_example_alone(packed_case, monkeypatch):
    model, y = packed_case["model"], packed_case["y"]
    alone = keras.ops.convert_to_numpy(model(packed_case["alone"], training=False))           # [N, C], unpacked
    np.testing.assert_allclose(packed_logits(packed_case), alone, atol=1e-5, rtol=0)
    rows = packed_case["rows"]
    present = rows >= 0
    targets = np.where(present, y[np.maximum(rows, 0)], 0)
    out = model(packed_case["packed"], training=False)
    ours = float(model.compute_loss(packed_case["packed"], targets, out, present.astype("float32")))
    reference = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, alone))   # Keras, unpacked
    assert abs(ours - reference) <= 1e-6 * reference
    # The mutation: attention across the examples of a row changes every example but a row's first.
    from bert_keras import layers
    monkeypatch.setattr(layers, "packed_attention_bias", crossing_attention)
    crossed = packed_logits(packed_case)
    assert np.abs(crossed - alone).max() > 1e-3
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(crossed, alone, atol=1e-5, rtol=0)


def test_packed_loss_is_the_mean_over_examples_for_regression_too():
    logits = np.array([[[1.0], [2.0]], [[3.0], [0.0]]], "float32")      # rows of 2 slots; the last slot empty
    targets = np.array([[0.0, 2.0], [1.0, 9.0]], "float32")
    weights = np.array([[1.0, 1.0], [1.0, 0.0]], "float32")
    assert float(packed_loss(keras.losses.MeanSquaredError(), targets, logits, weights)) == pytest.approx(
        (1 + 0 + 4) / 3, rel=1e-6)


def test_packed_training_batches_are_static_and_use_every_example(packed_case):
    case = packed_case
    packed = PackedTraining(case["task"], case["examples"], case["model"], batch_size=16, seed=3, max_per_row=K)
    assert packed.rows * K >= N and packed.rows_per_step >= 1
    x, targets, weights = next(iter(packed.dataset()))
    assert x["input_word_ids"].shape == (packed.rows_per_step, SEQ) and targets.shape == (packed.rows_per_step, K)
    assert float(packed.weights.sum()) == N
    assert sorted(packed.targets[packed.weights > 0].tolist()) == sorted(case["y"].tolist())
    again = PackedTraining(case["task"], case["examples"], case["model"], batch_size=16, seed=3, max_per_row=K)
    assert (again.features["input_word_ids"] == packed.features["input_word_ids"]).all()     # deterministic


def test_finetune_pack_trains_packed_and_saves_the_ordinary_classifier(tmp_path, minilm_vocab, capsys):
    import json

    from bert_keras_cli.main import main
    dev = SAMPLES.replace("train", "dev")
    base = ["finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab, "--train", SAMPLES,
            "--eval", dev, "--max-train-examples", "96", "--max-eval-examples", "16", "--batch-size", "16",
            "--epochs", "1", "--quiet", "--learning-rate", "1e-3"]
    args = base + ["--seq-length", str(SEQ)]
    assert main(args + ["--out", str(tmp_path / "packed"), "--pack"]) == 0
    out = capsys.readouterr().out
    assert "packed 96 training examples into" in out and "a step takes" in out
    record = json.loads((tmp_path / "packed" / "metrics.json").read_text())
    assert record["packed"]["examples"] == 96 and record["packed"]["examples_per_row"] > 2
    assert record["config"]["pack"] == 8
    steps = record["steps"]
    assert steps == (record["packed"]["rows"] // record["packed"]["rows_per_step"])
    # model.keras is the ordinary classifier: one example a row, raw text in.
    model = keras.models.load_model(tmp_path / "packed" / "model.keras")
    assert model.classify(["a fine film"])[0]["label"] in ("0", "1")
    capsys.readouterr()
    assert main(base + ["--out", str(tmp_path / "bad"), "--pack"]) == 2       # no --seq-length
    assert "--seq-length" in capsys.readouterr().err


def test_a_packed_run_stopped_mid_epoch_resumes_to_the_uninterrupted_weights(tmp_path, minilm_vocab, capsys):
    """The packed input skips the steps already trained, as unpacked (the rows reshuffled per epoch by the seed)."""
    from bert_keras.finetune import FinetuneConfig, finetune

    class StopAtStep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == self.step:
                raise KeyboardInterrupt

    def config(out, **changes):
        return FinetuneConfig(task="sst-2", model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / out),
                              train=SAMPLES, max_train_examples=96, epochs=2, batch_size=16, learning_rate=1e-3,
                              seq_length=SEQ, max_seq_length=SEQ, pack=K, progress=False, **changes)
    whole = finetune(config("whole"))
    per_epoch = whole["steps"] // 2
    stop = StopAtStep()
    stop.step = per_epoch + 3                                     # mid epoch 2, after a point (every 2 steps)
    with pytest.raises(KeyboardInterrupt):
        finetune(config("stopped", save_every=2), callbacks=[stop])
    capsys.readouterr()
    resumed = finetune(config("stopped", save_every=2))
    printed = capsys.readouterr().out
    assert "resumed at step" in printed and "in epoch 2" in printed, printed
    assert resumed["loss"] == whole["loss"]
    for a, b in zip(whole["model"].get_weights(), resumed["model"].get_weights()):
        np.testing.assert_array_equal(a, b)
