import dataclasses
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from bert_keras.training import create_strategy
from bert_keras.training.tpu import TpuHost, tpu_vm_signs
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


# TPU VMs (Colab, Kaggle, Cloud TPU VMs): each sign is faked here, on a machine without a TPU or libtpu, through
# TpuHost (a folder of device files, a site-packages of fake wheels and packages), and must end in an error that
# names the TPU type and the fix, never in a silent CPU strategy.
@pytest.fixture
def no_tpu_signs(monkeypatch, tmp_path):
    """A machine with no TPU sign: no TPU variables, an empty /dev, an empty site-packages -> (its root, TpuHost)."""
    for var in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "dev").mkdir()
    (tmp_path / "site-packages").mkdir()
    host = TpuHost(dev=str(tmp_path / "dev"), site_packages=[str(tmp_path / "site-packages")])
    assert tpu_vm_signs(host) == []                 # this machine: no TPU (the tests below add one sign each)
    return tmp_path, host


def install_libtpu(site):
    """An importable `libtpu` package in `site` (the real one is a wheel with the TPU runtime library)."""
    (site / "libtpu").mkdir()
    (site / "libtpu" / "__init__.py").write_text("")


@pytest.mark.parametrize("var,value", [("TPU_ACCELERATOR_TYPE", "v2-8"), ("TPU_WORKER_ID", "0")])
def test_a_tpu_vm_without_tensorflow_tpu_is_an_error_with_the_install_command(no_tpu_signs, monkeypatch, var, value):
    _, host = no_tpu_signs
    monkeypatch.setenv(var, value)
    for name in ("auto", "tpu"):
        with pytest.raises(RuntimeError) as e:
            create_strategy(name, host=host)
        message = str(e.value)
        assert f"${var}={value}" in message and f"pip install tensorflow-tpu=={tf.__version__}" in message
        assert "restart the runtime" in message
        assert ("v2-8" in message) == (var == "TPU_ACCELERATOR_TYPE")


@pytest.mark.parametrize("device", ["accel0", "vfio/0"])
def test_tpu_device_files_are_a_sign(no_tpu_signs, monkeypatch, device):
    root, host = no_tpu_signs
    path = root / "dev" / device
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    (root / "dev" / "vfio").mkdir(exist_ok=True)
    (root / "dev" / "vfio" / "vfio").write_text("")            # the VFIO container device alone is no sign
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    with pytest.raises(RuntimeError, match=f"v5litepod-1.*device files {path}.*tensorflow-tpu"):
        create_strategy("auto", host=host)


def test_vfio_container_device_alone_is_no_sign(no_tpu_signs):
    root, host = no_tpu_signs
    (root / "dev" / "vfio").mkdir()
    (root / "dev" / "vfio" / "vfio").write_text("")
    assert create_strategy("auto", host=host).num_replicas_in_sync == 1


def test_an_importable_libtpu_is_a_sign(no_tpu_signs):
    root, host = no_tpu_signs
    install_libtpu(root / "site-packages")
    assert tpu_vm_signs(host) == ["libtpu is installed"]


@pytest.fixture
def tpu_wheels_on_disk(no_tpu_signs):
    """libtpu importable and tensorflow-tpu installed with its files on disk (faked: a site-packages of fake wheels,
    tests/training/test_tpu_install.py), as the notebook's install sequence leaves a TPU VM -> (site, TpuHost)."""
    from test_tpu_install import TPU_FILES, fake_wheel, unpack
    root, host = no_tpu_signs
    site = root / "site-packages"
    install_libtpu(site)
    fake_wheel(site, "tensorflow_tpu-2.20.0.dist-info", TPU_FILES)
    unpack(site, TPU_FILES)
    return site, host


def test_a_tpu_vm_with_the_cpu_build_over_tensorflow_tpu_says_force_reinstall(tpu_wheels_on_disk, monkeypatch):
    """Both wheels installed, the CPU one unpacked last: stop before connecting, with what was found and the fix."""
    from test_tpu_install import CPU_FILES, fake_wheel, unpack
    site, host = tpu_wheels_on_disk
    fake_wheel(site, "tensorflow-2.20.0.dist-info", CPU_FILES)
    unpack(site, CPU_FILES)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    for name in ("auto", "tpu"):
        with pytest.raises(RuntimeError) as e:
            create_strategy(name, host=host)
        message = str(e.value)
        assert message.startswith("This machine is a TPU VM (v2-8; seen: $TPU_ACCELERATOR_TYPE=v2-8; libtpu is "
                                  "installed) but this TensorFlow cannot use the TPU: tensorflow-tpu 2.20.0 is "
                                  "installed, but the TensorFlow files on disk are not its: ")
        assert "they are tensorflow 2.20.0 (the CPU build)" in message
        assert message.endswith("Fix: `pip install --force-reinstall --no-deps tensorflow-tpu==2.20.0` (in a "
                                "notebook: %pip install ...), then restart the runtime.")


def test_libtpu_without_tensorflow_tpu_is_the_install_message(no_tpu_signs, monkeypatch):
    """libtpu alone (e.g. from JAX) does not make this TensorFlow a TPU build: the install command, as without it."""
    root, host = no_tpu_signs
    install_libtpu(root / "site-packages")                              # no tensorflow-tpu there
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    with pytest.raises(RuntimeError, match=r"v2-8.*libtpu is installed\) but this TensorFlow cannot use the TPU: "
                                           r"the `tensorflow-tpu` wheel \(with libtpu\) is not installed"):
        create_strategy("auto", host=host)


def test_a_tpu_that_does_not_initialise_names_the_error_and_the_fix(tpu_wheels_on_disk, monkeypatch):
    """The TPU build on disk (faked) but no TPU behind it: TensorFlow's own initialisation error, with the fix."""
    _, host = tpu_wheels_on_disk
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    with pytest.raises(RuntimeError, match=r"TPU VM \(v2-8; seen: .*libtpu is installed\) did not initialise: "
                                           r".*TPUs not found.*Fix: check that tensorflow-tpu"):
        create_strategy("auto", host=host)


def test_a_busy_tpu_says_restart_the_runtime(tpu_wheels_on_disk, monkeypatch):
    def busy(resolver):             # what initialize_tpu_system raises while another process holds the chips
        raise RuntimeError("TPU initialization failed: open(/dev/accel0): Device or resource busy: "
                           "The TPU is already in use by process with pid 1234.")
    _, host = tpu_wheels_on_disk
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    with pytest.raises(RuntimeError, match="v5litepod-8.*already in use.*another process holds the TPU.*restart"):
        create_strategy("auto", host=dataclasses.replace(host, connect=busy))


def test_no_sign_means_no_tpu_and_tpu_strategy_says_so(no_tpu_signs):
    _, host = no_tpu_signs
    assert not isinstance(create_strategy("auto", host=host), tf.distribute.TPUStrategy)
    with pytest.raises(RuntimeError, match="no TPU is signalled.*TPU_ACCELERATOR_TYPE"):
        create_strategy("tpu", host=host)


def test_tpu_name_and_the_legacy_colab_address_are_named_tpus(no_tpu_signs, monkeypatch):
    _, host = no_tpu_signs
    monkeypatch.setenv("COLAB_TPU_ADDR", "127.0.0.1:1")
    with pytest.raises(RuntimeError, match="No TPU reachable at grpc://127.0.0.1:1"):
        create_strategy("auto", host=host)
    monkeypatch.setenv("TPU_NAME", "grpc://127.0.0.1:2")                # $TPU_NAME comes first
    with pytest.raises(RuntimeError, match="No TPU reachable at grpc://127.0.0.1:2"):
        create_strategy("auto", host=host)
