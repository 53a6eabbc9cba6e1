"""The set-up both trainers share (bert_keras/training/): one config base, the chief's output folder, when the
last partial batch must go, and errors that name the flag to change."""

import dataclasses
import types

import pytest
import tensorflow as tf

from bert_keras.finetune import FinetuneConfig
from bert_keras.pretraining import PretrainConfig
from bert_keras.training import TrainingConfig
from bert_keras.training.setup import output_folder, static_batches


def test_both_configs_share_one_base_with_their_own_learning_rates():
    shared = {f.name for f in dataclasses.fields(TrainingConfig)}
    assert {"batch_size", "seed", "strategy", "mixed_precision", "jit_compile", "weight_decay"} <= shared
    finetune = FinetuneConfig(task="sst-2", model="m", out="o")
    pretrain = PretrainConfig(model="m", out="o", text="t")
    assert isinstance(finetune, TrainingConfig) and isinstance(pretrain, TrainingConfig)
    assert (finetune.learning_rate, pretrain.learning_rate) == (3e-5, 1e-4)         # BERT's recipes
    assert FinetuneConfig("sst-2", "m", "o").task == "sst-2"                       # positional as before


def fake_strategy(task_type, task_id, cluster):
    """What output_folder reads of a multi-worker strategy: its cluster resolver."""
    spec = tf.train.ClusterSpec(cluster)
    resolver = types.SimpleNamespace(task_type=task_type, task_id=task_id, cluster_spec=lambda: spec)
    return types.SimpleNamespace(cluster_resolver=resolver)


@pytest.mark.parametrize("task_type,task_id,cluster,expected", [
    ("worker", 0, {"worker": ["a:1", "b:2"]}, "run"),                       # worker 0 is the chief without one
    ("worker", 1, {"worker": ["a:1", "b:2"]}, "run/worker-1"),
    ("chief", 0, {"chief": ["a:1"], "worker": ["b:2"]}, "run"),
    ("worker", 0, {"chief": ["a:1"], "worker": ["b:2"]}, "run/worker-0"),
])
def test_only_the_chief_writes_the_run_folder(task_type, task_id, cluster, expected):
    assert output_folder(fake_strategy(task_type, task_id, cluster), "run") == expected
    assert output_folder(tf.distribute.get_strategy(), "run") == "run"


def test_the_last_partial_batch_goes_only_for_static_shapes():
    default = tf.distribute.get_strategy()
    assert not static_batches(default, None, False)
    assert not static_batches(default, None, True)           # XLA with batches padded to their longest
    assert not static_batches(default, 128, False)
    assert static_batches(default, 128, True)


def test_pretraining_warm_up_default_fits_short_runs_and_errors_name_the_flag(tmp_path):
    assert PretrainConfig(model="m", out="o", text="t", train_steps=1000).warmup() == 100
    assert PretrainConfig(model="m", out="o", text="t", train_steps=100).warmup() == 100
    assert PretrainConfig(model="m", out="o", text="t", train_steps=8).warmup() == 0
    assert PretrainConfig(model="m", out="o", text="t", train_steps=8, warmup_steps=3).warmup() == 3
    from bert_keras.pretraining import pretrain
    with pytest.raises(ValueError, match=r"--warmup-steps 20 must be between 0 and --train-steps 8"):
        pretrain(PretrainConfig(model="bert_tiny", out=str(tmp_path), text="t", train_steps=8, save_every=4,
                                warmup_steps=20))


def test_fine_tuning_errors_name_the_flag(tmp_path):
    from bert_keras.finetune import finetune
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\n" + "good .\t1\nbad .\t0\n" * 20)
    with pytest.raises(ValueError, match="--warmup-proportion"):
        finetune(FinetuneConfig(task="sst-2", model="bert_tiny", out=str(tmp_path / "o"), train=str(train),
                                warmup_proportion=1.5))
