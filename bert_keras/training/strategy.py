"""`--strategy auto|tpu|mirrored|multi_worker|cpu` -> a tf.distribute strategy.

auto: a TPU when there is one (tpu.py: --tpu or $TPU_NAME names a Cloud TPU; a TPU VM's own TPU; Colab's legacy
$COLAB_TPU_ADDR), several GPUs -> MirroredStrategy, else TF's default strategy. A TPU that is signalled but cannot
be used is an error naming the fix, never a silent CPU run. tpu: the same TPU search, an error when none is found.
multi_worker needs TF_CONFIG, as every MultiWorkerMirroredStrategy job does.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from bert_keras.training.tpu import TpuHost, named_tpu_strategy, tpu_vm_signs, tpu_vm_strategy

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker", "cpu")


def find_tpu(tpu: str | None = None, host: TpuHost | None = None):
    """TPUStrategy for the TPU this run should use, or None when nothing signals one (`host`: see TpuHost)."""
    host = host or TpuHost()
    name = tpu or os.environ.get("TPU_NAME")
    if name and name != "local":
        return named_tpu_strategy(name, host)
    signs = tpu_vm_signs(host) or (["$TPU_NAME=local"] if name == "local" else [])
    if signs:
        return tpu_vm_strategy(signs, host)
    if os.environ.get("COLAB_TPU_ADDR"):                        # the retired Colab TPU-Node runtime
        return named_tpu_strategy(f"grpc://{os.environ['COLAB_TPU_ADDR']}", host)
    return None


def create_strategy(name: str = "auto", tpu: str | None = None, *, host: TpuHost | None = None
                    ) -> tf.distribute.Strategy:
    """The tf.distribute strategy a `--strategy` value names (see the module docstring for "auto").

    Build the model, optimizer and metrics under `strategy.scope()`; a signalled TPU that cannot be used is an
    error naming the fix, never a silent CPU run.

    Args:
        name: str. "auto", "tpu", "mirrored", "multi_worker" or "cpu".
        tpu: str or None. A Cloud TPU name or grpc:// address ("local" for a TPU VM's own).
        host: bert_keras.training.tpu.TpuHost or None. Where TPU VM signs and TPU wheels are looked for and how
            the TPU is connected (None: this machine's /dev, sys.path and TensorFlow's TPU initialisation).

    Returns:
        A tf.distribute.Strategy (TF's default strategy for "auto" on one CPU or GPU).

    Raises:
        ValueError: an unknown `name`.
        RuntimeError: "tpu" with no TPU signalled, "multi_worker" without TF_CONFIG, or an unreachable TPU.

    Example:
        >>> strategy = bert_keras.training.create_strategy("cpu")
        >>> with strategy.scope():
        ...     encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> strategy.num_replicas_in_sync
        1
    """
    if name not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    if name == "auto":
        strategy = find_tpu(tpu, host)
        if strategy is not None:
            return strategy
        if len(tf.config.list_logical_devices("GPU")) > 1:
            return tf.distribute.MirroredStrategy()
        return tf.distribute.get_strategy()
    if name == "tpu":
        strategy = find_tpu(tpu, host)
        if strategy is None:
            raise RuntimeError("--strategy tpu, but no TPU is signalled: no --tpu or $TPU_NAME, no TPU VM signs "
                               "($TPU_ACCELERATOR_TYPE, /dev/accel*, /dev/vfio/<n>, libtpu) and no $COLAB_TPU_ADDR. "
                               "On Colab or Kaggle choose a TPU runtime; for a Cloud TPU pass --tpu NAME.")
        return strategy
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if not os.environ.get("TF_CONFIG"):
            raise RuntimeError("--strategy multi_worker needs TF_CONFIG (cluster workers and this task's index).")
        json.loads(os.environ["TF_CONFIG"])
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.OneDeviceStrategy("/cpu:0")
