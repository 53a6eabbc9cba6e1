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


@pytest.mark.integration
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


# TPU VMs (Colab, Kaggle, Cloud TPU VMs): each sign is faked here, on a machine without a TPU or libtpu, and must
# end in an error that names the TPU type and the fix, never in a silent CPU strategy.
@pytest.fixture
def no_tpu_signs(monkeypatch, tmp_path):
    import bert_keras.training.tpu as tpu
    for var in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tpu, "DEV", str(tmp_path))
    assert tpu.tpu_vm_signs() == []                  # this machine: no TPU (the tests below add one sign each)
    return tmp_path


@pytest.mark.parametrize("var,value", [("TPU_ACCELERATOR_TYPE", "v2-8"), ("TPU_WORKER_ID", "0")])
def test_a_tpu_vm_without_tensorflow_tpu_is_an_error_with_the_install_command(no_tpu_signs, monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    for name in ("auto", "tpu"):
        with pytest.raises(RuntimeError) as e:
            create_strategy(name)
        message = str(e.value)
        assert f"${var}={value}" in message and f"pip install tensorflow-tpu=={tf.__version__}" in message
        assert "restart the runtime" in message
        assert ("v2-8" in message) == (var == "TPU_ACCELERATOR_TYPE")


@pytest.mark.parametrize("device", ["accel0", "vfio/0"])
def test_tpu_device_files_are_a_sign(no_tpu_signs, monkeypatch, device):
    path = no_tpu_signs / device
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    (no_tpu_signs / "vfio").mkdir(exist_ok=True)
    (no_tpu_signs / "vfio" / "vfio").write_text("")            # the VFIO container device alone is no sign
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    with pytest.raises(RuntimeError, match=f"v5litepod-1.*device files {path}.*tensorflow-tpu"):
        create_strategy("auto")


def test_vfio_container_device_alone_is_no_sign(no_tpu_signs):
    (no_tpu_signs / "vfio").mkdir()
    (no_tpu_signs / "vfio" / "vfio").write_text("")
    assert create_strategy("auto").num_replicas_in_sync == 1


def test_a_tpu_that_does_not_initialise_names_the_error_and_the_fix(no_tpu_signs, monkeypatch):
    """libtpu present (faked) but no TPU behind it: TensorFlow's own initialisation error, with the fix."""
    import bert_keras.training.tpu as tpu
    monkeypatch.setattr(tpu, "libtpu_installed", lambda: True)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    with pytest.raises(RuntimeError, match=r"TPU VM \(v2-8; seen: .*libtpu is installed\) did not initialise: "
                                           r".*TPUs not found.*Fix: check that tensorflow-tpu"):
        create_strategy("auto")


def test_a_busy_tpu_says_restart_the_runtime(no_tpu_signs, monkeypatch):
    import bert_keras.training.tpu as tpu
    monkeypatch.setattr(tpu, "libtpu_installed", lambda: True)

    def busy(resolver):
        raise RuntimeError("TPU initialization failed: open(/dev/accel0): Device or resource busy: "
                           "The TPU is already in use by process with pid 1234.")
    monkeypatch.setattr(tpu, "_connect", busy)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    with pytest.raises(RuntimeError, match="v5litepod-8.*already in use.*another process holds the TPU.*restart"):
        create_strategy("auto")


def test_no_sign_means_no_tpu_and_tpu_strategy_says_so(no_tpu_signs):
    assert not isinstance(create_strategy("auto"), tf.distribute.TPUStrategy)
    with pytest.raises(RuntimeError, match="no TPU is signalled.*TPU_ACCELERATOR_TYPE"):
        create_strategy("tpu")


def test_tpu_name_and_the_legacy_colab_address_are_named_tpus(no_tpu_signs, monkeypatch):
    monkeypatch.setenv("COLAB_TPU_ADDR", "127.0.0.1:1")
    with pytest.raises(RuntimeError, match="No TPU reachable at grpc://127.0.0.1:1"):
        create_strategy("auto")
    monkeypatch.setenv("TPU_NAME", "grpc://127.0.0.1:2")                # $TPU_NAME comes first
    with pytest.raises(RuntimeError, match="No TPU reachable at grpc://127.0.0.1:2"):
        create_strategy("auto")
