"""tools/parity/acceptance_finetune.py --paired hands the PyTorch reference ours' training order. `training_order`
rebuilds that order from finetune's pipeline and seeds; these tests check the rebuilt order against what
finetune's real input pipeline (trainer.training_input) yields, through the model's own preprocessing of the
examples named, and that a pipeline that does not match makes it raise instead of pairing the wrong items."""

import dataclasses
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.finetune import FinetuneConfig
from bert_keras.finetune import trainer
from bert_keras.loading import load_backbone
from bert_keras.finetune.registry import get_task

import acceptance_finetune  # noqa: E402

from synthetic_data import WORDS, sst2_file, squad_file  # noqa: E402


def setup(task_name, path, minilm_vocab, tmp_path, **task_args):
    config = FinetuneConfig(task=task_name, model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / "out"),
                            train=str(path), batch_size=8, epochs=2, max_seq_length=64, seed=3, task_args=task_args)
    task = get_task(task_name, **task_args)
    train = task.read(str(path))
    encoder, preprocessor = load_backbone("bert_tiny", minilm_vocab, max_seq_length=64)
    return config, task, train, task.build_model(encoder, preprocessor, train)


def real_batches(task, train, model, config, steps):
    import keras
    keras.utils.set_random_seed(config.seed)
    return list(trainer.training_input(task, train, model, config).take(steps))      # on a CPU: partial kept


def unpadded(ids, mask):
    return [row[m.astype(bool)].tolist() for row, m in zip(np.asarray(ids), np.asarray(mask))]


def test_sentence_order_is_finetunes(minilm_vocab, tmp_path):
    sst2_file(tmp_path / "train.tsv")
    config, task, train, model = setup("sst-2", tmp_path / "train.tsv", minilm_vocab, tmp_path)
    steps = 2 * 5                                    # 37 sentences: 4 batches of 8 and one of 5 per epoch
    order, lengths = acceptance_finetune.training_order(task, train, model, config, steps)

    assert len(order) == steps and [len(b) for b in order] == [8, 8, 8, 8, 5] * 2
    epochs = [sum(order[:5], []), sum(order[5:], [])]
    assert all(sorted(e) == list(range(37)) for e in epochs) and epochs[0] != epochs[1]   # all seen, reshuffled
    for (x, y), items, length in zip(real_batches(task, train, model, config, steps), order, lengths):
        assert x["input_word_ids"].shape[1] == length
        texts = tf.constant([train[i].text_a for i in items])
        expected = model.preprocessor(texts)
        assert unpadded(x["input_word_ids"], x["input_mask"]) == unpadded(expected["input_word_ids"],
                                                                          expected["input_mask"])
        assert np.asarray(y).tolist() == [train[i].label for i in items]


def test_window_order_is_finetunes(minilm_vocab, tmp_path):
    squad_file(tmp_path / "squad.json")
    config, task, train, model = setup("squad", tmp_path / "squad.json", minilm_vocab, tmp_path, doc_stride=16)
    windows = model.windows(tf.constant([e.question for e in train]), tf.constant([e.context for e in train]))
    counts = np.bincount(windows["example_index"].numpy(), minlength=len(train))
    assert counts.max() > 1                          # the longer contexts make several windows
    steps = 2 * (int(counts.sum()) // 8)
    order, lengths = acceptance_finetune.training_order(task, train, model, config, steps)

    assert all(0 <= w < counts[q] for b in order for q, w in b)
    first = np.concatenate([[0], np.cumsum(counts)])
    for (x, _), items, length in zip(real_batches(task, train, model, config, steps), order, lengths):
        assert x["input_word_ids"].shape[1] == length
        rows = [first[q] + w for q, w in items]
        assert unpadded(x["input_word_ids"], x["input_mask"]) == unpadded(
            tf.gather(windows["input_word_ids"], rows), tf.gather(windows["input_mask"], rows))


def test_a_pipeline_that_differs_raises(minilm_vocab, tmp_path):
    lines = [f"{w} {i}\t{i % 2}" for i, w in enumerate(WORDS)]
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    config, task, train, model = setup("sst-2", tmp_path / "train.tsv", minilm_vocab, tmp_path)
    def another_seed(task, train, model, config, **kwargs):
        return trainer.training_input(task, train, model, dataclasses.replace(config, seed=config.seed + 1), **kwargs)
    with pytest.raises(RuntimeError, match="not the rebuilt order"):
        acceptance_finetune.training_order(task, train, model, config, 4, pipeline=another_seed)


def test_ours_starts_from_a_given_head_and_writes_its_starting_head(tmp_path, minilm_dir):
    """run_ours' head hooks (--paired, --head-out, --head-from: the JAX run of acceptance_backends.py starts from
    TensorFlow's head): the head written is the one training started from, not the trained one, and a given head
    replaces the model's own draw."""
    path = sst2_file(tmp_path / "train.tsv", n=24)
    settings = dict(task="sst-2", model=minilm_dir, train=str(path), eval=str(path), epochs=1, batch_size=8,
                    learning_rate=1e-3, max_seq_length=32, max_train_examples=None, max_eval_examples=None, seed=0)
    given = np.random.default_rng(5).normal(0, 0.02, (384, 2)).astype("float32")
    np.savez(tmp_path / "given.npz", kernel=given, bias=np.array([0.1, -0.1], "float32"))
    (tmp_path / "run").mkdir()
    result = acceptance_finetune.run_ours(settings, str(tmp_path / "run"), paired=False,
                                          head_out=str(tmp_path / "out.npz"), head_from=str(tmp_path / "given.npz"))
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["kernel"], given)
        np.testing.assert_array_equal(out["bias"], np.array([0.1, -0.1], "float32"))
    assert result["steps"] == 3
    (tmp_path / "own").mkdir()
    acceptance_finetune.run_ours(settings, str(tmp_path / "own"), paired=False, head_out=str(tmp_path / "own.npz"))
    with np.load(tmp_path / "own.npz") as own:
        assert own["kernel"].shape == given.shape and not np.allclose(own["kernel"], given)
        np.testing.assert_array_equal(own["bias"], [0, 0])                     # drawn, not yet trained
