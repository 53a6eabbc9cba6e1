"""Packed fine-tuning of a token tagger (`finetune --pack` on CoNLL-2003-style data; issue 49 item 4): sentences
packed up to 8 a row at length 64 give bert_tiny's tagger, at every real token, the logits each sentence gets alone
in an ordinary padded row (the functional, unpacked graph: the reference), and Keras' compiled loss on the packed
piece labels equals its loss on the unpacked batch of the same sentences; letting attention cross the sentences of
a row (the mutation) breaks it."""

import json
import sys

import keras
import numpy as np
import pytest

from bert_keras.data import CONLL2003_LABELS
from bert_keras.finetune.packed_examples import PackedTraining, example_ids, pack_examples, packed_rows
from bert_keras.finetune.registry import get_task
from bert_keras.loading import load_backbone
from bert_keras.tasks.tagger import IGNORE

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/pretraining")
from packed_batches import crossing_attention  # noqa: E402
from synthetic_data import conll_file  # noqa: E402

SEQ, K, N = 64, 8, 40


@pytest.fixture(scope="module")
def case(minilm_vocab, tmp_path_factory):
    keras.utils.set_random_seed(0)
    task = get_task("conll2003")
    train = conll_file(tmp_path_factory.mktemp("conll") / "train.txt")
    examples = task.read(str(train))
    encoder, preprocessor = load_backbone("bert_tiny", minilm_vocab, seq_length=SEQ, max_seq_length=SEQ)
    model = task.build_model(encoder, preprocessor, examples)
    model.compile(optimizer="sgd", **task.compile_args())
    x, y = task.inputs(examples)
    ids, lengths, labels = example_ids(model, x, y=y)
    rows = pack_examples(lengths, SEQ, K)
    return {"task": task, "train": train, "examples": examples, "model": model, "ids": ids, "lengths": lengths,
            "labels": labels, "rows": rows, "packed": packed_rows(ids, lengths, rows),
            "alone": {**ids, "input_mask": (np.arange(SEQ) < lengths[:, None]).astype("int32")}}


def unpacked_from_rows(case, packed_logits) -> np.ndarray:
    """Packed logits [R, S, L] -> each sentence's own rows [N, S, L] (zeros past its tokens)."""
    out = np.zeros((len(case["lengths"]),) + packed_logits.shape[1:], "float32")
    for r, row in enumerate(case["rows"]):
        start = 0
        for i in row[row >= 0]:
            out[i, :case["lengths"][i]] = packed_logits[r, start:start + case["lengths"][i]]
            start += case["lengths"][i]
    return out


def test_packed_tagger_logits_and_loss_equal_each_sentence_alone(case, monkeypatch):
    model, lengths = case["model"], case["lengths"]
    assert len(case["rows"]) < N / 2 and (case["labels"] != IGNORE).sum() > N     # several a row, labels present
    alone = keras.ops.convert_to_numpy(model(case["alone"], training=False))             # [N, S, L] unpacked
    real = np.arange(SEQ) < lengths[:, None]
    packed = unpacked_from_rows(case, keras.ops.convert_to_numpy(model(case["packed"], training=False)))
    np.testing.assert_allclose(packed[real], alone[real], atol=1e-5, rtol=0)
    # The loss of the packed training input (all rows in one batch) is Keras' loss on the unpacked batch.
    training = PackedTraining(case["task"], case["examples"], model, batch_size=N, seed=0, max_per_row=K)
    loss = case["task"].compile_args()["loss"]
    ours = float(loss(training.targets, model(training.features, training=False)))
    reference = float(loss(case["labels"], alone))
    assert abs(ours - reference) <= 1e-6 * reference
    assert sorted(training.targets[training.targets != IGNORE].tolist()) == \
        sorted(case["labels"][case["labels"] != IGNORE].tolist())
    # The mutation: attention across the sentences of a row changes their labels' logits.
    from bert_keras import layers
    monkeypatch.setattr(layers, "packed_attention_bias", crossing_attention)
    crossed = unpacked_from_rows(case, keras.ops.convert_to_numpy(model(case["packed"], training=False)))
    assert np.abs(crossed[real] - alone[real]).max() > 1e-3


def test_finetune_pack_trains_a_tagger_and_saves_the_ordinary_one(case, minilm_vocab, tmp_path, capsys):
    from bert_keras_cli.main import main
    argv = ["finetune", "--task", "conll2003", "--model", "bert_tiny", "--vocab", minilm_vocab, "--train",
            str(case["train"]), "--batch-size", "8", "--epochs", "1", "--seq-length", str(SEQ), "--pack", "--quiet",
            "--learning-rate", "1e-3", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert f"packed {N} training examples into" in capsys.readouterr().out
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert record["packed"]["examples"] == N and record["packed"]["examples_per_row"] > 2
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    labels = model.tag_words([["Ada", "Lovelace", "wrote", "it"]])[0]
    assert len(labels) == 4 and set(labels) <= set(CONLL2003_LABELS)
