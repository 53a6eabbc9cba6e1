"""tools/parity/dropout_replay.py against transformers: with the same weights and replayed masks, a training-mode forward
pass of bert_keras' task model gives transformers' outputs, for each head layout (pooled [CLS] with the last layer
on [CLS] only, tagging with a head dropout on every token, SQuAD without one) and on batches with padding (where
bert_keras' blocks run on the real tokens only). Runs where the `torch` extra is installed (torch 2.13.0 and
transformers, as for the acceptance tools): marked `torch`, run by `make test-torch`. Mutation check: drawing the hidden-state masks over
padding too, or the pooled heads' last layer in full, fails it.
"""

import os
import sys

import numpy as np
import pytest

try:
    import torch
    import transformers
except ImportError:             # the [torch] extra: `make test-torch` installs it; the default tiers deselect these
    torch = transformers = None

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module", autouse=True)
def torch_extra():
    assert torch is not None and transformers is not None, "pip install -e '.[torch]' (make test-torch does)"


LAYERS, HIDDEN = 2, 32


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A tiny random BERT saved as a Hugging Face folder (config.json + model.safetensors)."""
    folder = tmp_path_factory.mktemp("tiny_bert")
    config = transformers.BertConfig(vocab_size=60, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=32,
                                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return str(folder)


def batch(shape, lengths, seed=0):
    """ids [*shape] with rows padded after `lengths` (flattened over all but the last axis)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 60, size=shape)
    mask = np.zeros(shape, "int64")
    for row, n in zip(mask.reshape(-1, shape[-1]), lengths):
        row[:n] = 1
    types = np.zeros(shape, "int64")
    types[..., shape[-1] // 2:] = 1
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types * mask}


CASES = {
    # task: (transformers class, its kwargs, bert_keras' head layer, batch shape)
    "sst-2": ("BertForSequenceClassification", {"num_labels": 3}, "logits", (4, 16)),
    "openbookqa": ("BertForMultipleChoice", {}, "choice_score", (2, 3, 16)),
    "conll2003": ("BertForTokenClassification", {"num_labels": 5}, "logits", (4, 16)),
    "squad": ("BertForQuestionAnswering", {}, "span_logits", (4, 16)),
}


def ours_model(task, encoder):
    from bert_keras import tasks
    if task == "sst-2":
        return tasks.BertClassifier(encoder, num_classes=3)
    if task == "openbookqa":
        return tasks.BertMultipleChoice(encoder)
    if task == "conll2003":
        return tasks.BertTagger(encoder, num_labels=5)
    return tasks.BertSpanLabeler(encoder)


@pytest.mark.parametrize("task", sorted(CASES))
def test_replayed_training_forward_matches_transformers(task, hf_folder):
    import tensorflow as tf
    from dropout_replay import TASK_LAYOUT, KerasReplay, TorchReplay
    from bert_keras.checkpoints import load_checkpoint

    hf_class, hf_args, head, shape = CASES[task]
    torch.manual_seed(1)
    theirs = getattr(transformers, hf_class).from_pretrained(hf_folder, attn_implementation="eager", **hf_args)
    head_module = theirs.qa_outputs if task == "squad" else theirs.classifier
    lengths = [16, 9, 5, 12, 7, 3][:int(np.prod(shape[:-1]))]
    ids = batch(shape, lengths)
    feed = {"input_word_ids": ids["input_ids"].astype("int32"), "input_mask": ids["attention_mask"].astype("int32"),
            "input_type_ids": ids["token_type_ids"].astype("int32")}

    _, encoder = load_checkpoint(hf_folder)
    ours = ours_model(task, encoder)
    ours.get_layer(head).set_weights([head_module.weight.detach().numpy().T, head_module.bias.detach().numpy()])
    replay = KerasReplay(ours)
    assert replay.head_dropout == TASK_LAYOUT[task][1]
    forward = tf.function(lambda x: ours(x, training=True))
    ours_out = {}
    for t in (0, 7):
        replay.start(t)
        out = forward(feed)
        ours_out[t] = out if isinstance(out, dict) else {"logits": out}
        replay.check(t + 1)                          # each layer drew its calls of one step
    plain = ours(feed, training=False)

    theirs.train()
    theirs_out = {}
    with TorchReplay(LAYERS, *TASK_LAYOUT[task]) as torch_replay, torch.no_grad():
        for t in (0, 7):
            torch_replay.begin(t, torch.tensor(ids["attention_mask"]))
            out = theirs(**{k: torch.tensor(v) for k, v in ids.items()})
            torch_replay.end()
            theirs_out[t] = ({"start_logits": out.start_logits, "end_logits": out.end_logits} if task == "squad"
                             else {"logits": out.logits})

    real = ids["attention_mask"].astype(bool)
    for t in (0, 7):
        for name, value in theirs_out[t].items():
            a, b = np.asarray(ours_out[t][name]), value.numpy()
            if task in ("conll2003", "squad"):   # per token: ours computes no padding (squad: -10000 there)
                a, b = a[real], b[real]
            np.testing.assert_allclose(a, b, atol=2e-5, err_msg=f"{task} {name} step {t}")
    # the masks did something, and differ by step
    first = np.asarray(next(iter(ours_out[0].values())))
    assert not np.allclose(first, np.asarray(next(iter(ours_out[7].values()))), atol=1e-4)
    plain = plain if not isinstance(plain, dict) else next(iter(plain.values()))
    assert not np.allclose(first, np.asarray(plain), atol=1e-4)
