import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from bert_keras.training import create_strategy
from conftest import REPO


def test_cpu_and_auto_strategies():
    assert isinstance(create_strategy("cpu"), tf.distribute.OneDeviceStrategy)
    assert create_strategy("auto").num_replicas_in_sync == 1


def test_unreachable_tpu_fails_fast_with_advice():
    with pytest.raises(RuntimeError, match="No TPU reachable at grpc://127.0.0.1:1 .*--strategy cpu"):
        create_strategy("tpu", tpu="grpc://127.0.0.1:1")


def test_multi_worker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(RuntimeError, match="TF_CONFIG"):
        create_strategy("multi_worker")
    with pytest.raises(ValueError, match="must be one of"):
        create_strategy("gpu")


def test_mirrored_over_two_logical_cpus_sums_across_replicas():
    # Logical devices must be configured before TensorFlow initialises, so this runs in its own process.
    script = textwrap.dedent("""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from bert_keras.training import create_strategy
        strategy = create_strategy("mirrored")
        total = strategy.reduce("SUM", strategy.run(
            lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group + 1, tf.float32)), axis=None)
        print(strategy.num_replicas_in_sync, float(total))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["2", "3.0"]
