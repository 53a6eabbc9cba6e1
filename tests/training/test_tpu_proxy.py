"""The TPU proxy on CPU for every task kind and for pretraining: fixed sequence length, drop_remainder,
`jit_compile=True`, `mixed_bfloat16`, `steps_per_execution=2`. For each, the traced train function is read
(tpu_compile.py): static batch shapes, no strings, no TF.Text ops, no host callbacks, an XLA-compiled step inside a
loop; and the loss falls over a few epochs on a small slice. Data is written here (no ../shared needed)."""

import json

import keras
import pytest

from bert_keras.data import SAMPLES
from conftest import FIXTURES
from tpu_compile import train_step_problems

pytestmark = pytest.mark.integration          # whole fine-tuning and pretraining runs with TPU shapes

PROXY = {"jit_compile": True, "mixed_precision": "mixed_bfloat16", "steps_per_execution": 2}
NAMES = ["Ann Smith", "Bo Chen", "Carl Diaz", "Dana Eke", "Eli Fox", "Fay Gil", "Gus Ho", "Ida Ivy"]
CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Quito", "Hanoi", "Dakar", "Perth"]


@pytest.fixture(autouse=True)
def float32_after():
    yield
    keras.mixed_precision.set_global_policy("float32")      # finetune sets the global policy


def _squad(path):
    paragraphs = []
    for i in range(32):
        name, city = NAMES[i % 8], CITIES[(i * 3) % 8]
        context = f"{name} was born in {city} in {1900 + i}. Later {name.split()[0]} moved away and wrote books."
        paragraphs.append({"context": context, "qas": [{"id": str(i), "question": f"Where was {name} born?",
                                                        "answers": [{"text": city,
                                                                     "answer_start": context.index(city)}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))


def _openbookqa(path):
    rows = []
    for i in range(32):
        choices = [f"a {w} {CITIES[(i + k) % 8]}" for k, w in enumerate(["cold", "warm", "sunny", "rainy"])]
        rows.append({"id": str(i), "question": {"stem": f"What is the weather in {CITIES[i % 8]}?", "choices": [
            {"text": t, "label": "ABCD"[k]} for k, t in enumerate(choices)]}, "answerKey": "ABCD"[i % 4]})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _conll(path):
    lines = ["-DOCSTART- -X- -X- O", ""]
    for i in range(32):
        first, last = NAMES[i % 8].split()
        for word, tag in ((first, "B-PER"), (last, "I-PER"), ("visited", "O"), (CITIES[i % 8], "B-LOC"), (".", "O")):
            lines.append(f"{word} NN O {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("task,seq_length,write,file", [
    ("sst-2", 128, None, f"{SAMPLES}/sst2_train.tsv"),
    ("squad", 384, _squad, "train.json"),
    ("openbookqa", 128, _openbookqa, "train.jsonl"),
    ("conll2003", 128, _conll, "train.txt"),
])
def test_fine_tuning_is_tpu_shaped_and_learns(minilm_vocab, tmp_path, task, seq_length, write, file):
    from bert_keras.finetune import FinetuneConfig, finetune
    if write:
        write(tmp_path / file)
        file = str(tmp_path / file)
    result = finetune(FinetuneConfig(task=task, model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / "run"),
                                     train=file, epochs=3, batch_size=8, learning_rate=2e-3, max_train_examples=32,
                                     seq_length=seq_length, max_seq_length=seq_length, progress=False, **PROXY))
    assert train_step_problems(result["model"], steps_per_execution=2, bfloat16=True) == []
    loss = result["loss"]
    assert len(loss) == 3 and loss[-1] < loss[0], loss


def test_pretraining_is_tpu_shaped_and_learns(minilm_vocab, tmp_path):
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, PretrainConfig, create_pretraining_data, pretrain
    create_pretraining_data([str(FIXTURES / "pretraining_corpus.txt")], BertPreprocessor(minilm_vocab),
                            str(tmp_path / "records" / "corpus"), 1,
                            MaskingConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2), seed=1)
    result = pretrain(PretrainConfig(model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / "run"),
                                     records=str(tmp_path / "records"), max_seq_length=64, max_predictions_per_seq=10,
                                     train_steps=24, save_every=8, batch_size=8, learning_rate=2e-3, warmup_steps=2,
                                     progress=False, **PROXY))
    assert train_step_problems(result["model"], steps_per_execution=2, bfloat16=True) == []
    losses = [h["loss"] for h in result["history"]]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
