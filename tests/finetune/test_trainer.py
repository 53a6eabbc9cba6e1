"""The fine-tuning trainer's bookkeeping: steps counted once match the batches its input pipeline yields, the last
partial batch is kept unless shapes must be static (and the run says when it drops one), and a run without an
evaluation set says so instead of printing an empty result."""

import json

import numpy as np
import pytest

from bert_keras.finetune.registry import get_task
from bert_keras.finetune.trainer import steps_per_epoch
from bert_keras.loading import load_backbone
from bert_keras_cli.main import main

from synthetic_data import squad_file, sst2_file


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("task_name,write,task_args", [("sst-2", sst2_file, {}),
                                                      ("squad", squad_file, {"doc_stride": 16})])
def test_steps_counted_once_are_the_pipelines_batches(minilm_vocab, tmp_path, task_name, write, task_args, drop):
    task = get_task(task_name, **task_args)
    train = task.read(str(write(tmp_path / "train")))
    encoder, preprocessor = load_backbone("bert_tiny", minilm_vocab, max_seq_length=64)
    model = task.build_model(encoder, preprocessor, train)
    steps, sequences = steps_per_epoch(task, train, model, 8, drop)
    batches = [int(x["input_word_ids"].shape[0]) for x, _ in task.dataset(train, model, 8, training=True,
                                                                         drop_remainder=drop)]
    assert steps == len(batches) and sum(batches) == sequences - (sequences % 8 if drop else 0)
    assert sequences % 8                                  # the data leave a partial batch to keep or drop
    if task_name == "squad":
        assert sequences > len(train)                     # the longer contexts make several windows


def test_static_shapes_drop_the_partial_batch_and_say_so(minilm_vocab, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
                 "--train", str(sst2_file(tmp_path / "train.tsv")), "--out", str(out), "--epochs", "1",
                 "--batch-size", "8", "--seq-length", "32", "--max-seq-length", "32", "--jit-compile"])
    captured = capsys.readouterr().out
    assert code == 0
    assert "dropping the last partial batch of each epoch (5 of 37 training sequences)" in captured
    assert "final: no evaluation set" in captured and "final: {}" not in captured
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["steps_per_epoch"], metrics["dropped_last_batch"], metrics["final"]) == (4, True, {})


def scalars(folder) -> dict:
    """{tag: {step: value}} from every TensorBoard event file in `folder`, read with TensorFlow's own reader."""
    import tensorflow as tf
    found = {}
    for path in folder.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                found.setdefault(value.tag, {})[event.step] = number
    return found


def test_tensorboard_and_the_record_repeat_the_run(minilm_vocab, tmp_path, capsys):
    train = str(sst2_file(tmp_path / "train.tsv", n=40))
    out = tmp_path / "run"
    code = main(["finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
                 "--train", train, "--eval", train, "--out", str(out), "--epochs", "2", "--batch-size", "8",
                 "--learning-rate", "1e-3", "--max-seq-length", "32", "--log-every", "2", "--seed", "4",
                 "--schedule", "google", "--weight-decay", "0.02", "--adam-epsilon", "1e-8"])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    # TensorBoard: loss and learning rate every 2 of the 10 steps; the evaluation metric after each epoch.
    logged = scalars(out / "logs" / "train")
    assert sorted(logged["batch_loss"]) == [2, 4, 6, 8, 10]
    # google-research's schedule (not finetune's default) by hand: 10 steps, warm-up int(0.1 * 10) = 1 step, then
    # 1e-3 * (1 - step / 10) (the default, transformers' linear one, would be 1e-3 * (10 - step) / 9).
    assert logged["batch_learning_rate"] == pytest.approx({s: 1e-3 * (1 - s / 10) for s in (2, 4, 6, 8, 10)})
    assert (metrics["config"]["schedule"], metrics["config"]["weight_decay"], metrics["config"]["adam_epsilon"]) \
        == ("google", 0.02, 1e-8)
    assert list(logged["epoch_eval_accuracy"].values()) == pytest.approx([h["accuracy"] for h in metrics["history"]])
    # metrics.json: every setting, the seed, versions, the machine, steps and per-epoch timings.
    assert metrics["config"]["learning_rate"] == 1e-3 and metrics["config"]["log_every"] == 2
    assert metrics["seed"] == 4 and metrics["steps"] == 10 and metrics["versions"]["tensorflow"]
    assert metrics["host"]["cpus"] >= 1 and metrics["host"]["replicas"] == 1
    assert [e["epoch"] for e in metrics["timing"]["epochs"]] == [1, 2]
    assert all(e["examples_per_second"] > 0 for e in metrics["timing"]["epochs"])

    again = tmp_path / "again"
    assert main(["finetune", "--quiet", "--from-record", str(out / "metrics.json"), "--out", str(again)]) == 0
    assert f"repeating the run recorded in {out / 'metrics.json'}" in capsys.readouterr().out
    repeated = json.loads((again / "metrics.json").read_text())
    assert repeated["config"] == {**metrics["config"], "out": str(again)}
    assert repeated["history"] == metrics["history"]
    for a, b in zip(weights(out / "model.keras"), weights(again / "model.keras")):
        np.testing.assert_array_equal(a, b)


def weights(path):
    import keras
    return [np.asarray(w) for w in keras.models.load_model(path).weights]


@pytest.mark.parametrize("change, message", [({"batch_size": 0}, "--batch-size 0"), ({"epochs": -1}, "--epochs -1"),
                                             ({"learning_rate": 0.0}, "--learning-rate 0.0"),
                                             ({"max_seq_length": 600}, "--max-seq-length 600 is over the 512"),
                                             ({"warmup_proportion": 1.5}, "--warmup-proportion 1.5")])
def test_settings_are_checked_before_anything_is_read(tmp_path, change, message):
    """From Python as from the command line (whose flag types refuse the same): before the data is read (there is
    none here) and without a run folder left behind."""
    from bert_keras.finetune import FinetuneConfig, finetune
    config = FinetuneConfig(**{"task": "sst-2", "model": "bert_tiny", "out": str(tmp_path / "run"),
                               "train": str(tmp_path / "missing.tsv"), **change})
    with pytest.raises(ValueError, match=message):
        finetune(config)
    assert not (tmp_path / "run").exists()
