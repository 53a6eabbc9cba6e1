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


@pytest.fixture
def tpu_wheels_on_disk(no_tpu_signs, monkeypatch, tmp_path_factory):
    """libtpu importable and tensorflow-tpu installed with its files on disk (faked: a site-packages of fake wheels,
    tests/training/test_tpu_install.py), as the notebook's install sequence leaves a TPU VM."""
    import bert_keras.training.tpu as tpu
    from test_tpu_install import TPU_FILES, fake_wheel, unpack
    site = tmp_path_factory.mktemp("site-packages")
    fake_wheel(site, "tensorflow_tpu-2.20.0.dist-info", TPU_FILES)
    unpack(site, TPU_FILES)
    monkeypatch.setattr(tpu, "libtpu_installed", lambda: True)
    monkeypatch.setattr(tpu, "WHEELS_PATH", [str(site)])
    return site


def test_a_tpu_vm_with_the_cpu_build_over_tensorflow_tpu_says_force_reinstall(tpu_wheels_on_disk, monkeypatch):
    """Both wheels installed, the CPU one unpacked last: stop before connecting, with what was found and the fix."""
    from test_tpu_install import CPU_FILES, fake_wheel, unpack
    fake_wheel(tpu_wheels_on_disk, "tensorflow-2.20.0.dist-info", CPU_FILES)
    unpack(tpu_wheels_on_disk, CPU_FILES)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    for name in ("auto", "tpu"):
        with pytest.raises(RuntimeError) as e:
            create_strategy(name)
        message = str(e.value)
        assert message.startswith("This machine is a TPU VM (v2-8; seen: $TPU_ACCELERATOR_TYPE=v2-8; libtpu is "
                                  "installed) but this TensorFlow cannot use the TPU: tensorflow-tpu 2.20.0 is "
                                  "installed, but the TensorFlow files on disk are not its: ")
        assert "they are tensorflow 2.20.0 (the CPU build)" in message
        assert message.endswith("Fix: `pip install --force-reinstall --no-deps tensorflow-tpu==2.20.0` (in a "
                                "notebook: %pip install ...), then restart the runtime.")


def test_libtpu_without_tensorflow_tpu_is_the_install_message(no_tpu_signs, monkeypatch):
    """libtpu alone (e.g. from JAX) does not make this TensorFlow a TPU build: the install command, as without it."""
    import bert_keras.training.tpu as tpu
    monkeypatch.setattr(tpu, "libtpu_installed", lambda: True)
    monkeypatch.setattr(tpu, "WHEELS_PATH", [str(no_tpu_signs)])       # no tensorflow-tpu there
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    with pytest.raises(RuntimeError, match=r"v2-8.*libtpu is installed\) but this TensorFlow cannot use the TPU: "
                                           r"the `tensorflow-tpu` wheel \(with libtpu\) is not installed"):
        create_strategy("auto")


def test_a_tpu_that_does_not_initialise_names_the_error_and_the_fix(tpu_wheels_on_disk, monkeypatch):
    """The TPU build on disk (faked) but no TPU behind it: TensorFlow's own initialisation error, with the fix."""
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    with pytest.raises(RuntimeError, match=r"TPU VM \(v2-8; seen: .*libtpu is installed\) did not initialise: "
                                           r".*TPUs not found.*Fix: check that tensorflow-tpu"):
        create_strategy("auto")


def test_a_busy_tpu_says_restart_the_runtime(tpu_wheels_on_disk, monkeypatch):
    import bert_keras.training.tpu as tpu

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
