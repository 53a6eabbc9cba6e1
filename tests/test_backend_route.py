"""Which Keras backend bert_keras takes when KERAS_BACKEND is unset (backend_route.py): JAX on a TPU VM with JAX and
without tensorflow-tpu (Colab's and Kaggle's TPU images today), TensorFlow everywhere else. Checked on faked
machines: a folder of device files and a folder of installed packages, as tests/training/test_strategy.py fakes
TPU VMs."""

import os
import subprocess
import sys

import pytest

from bert_keras.backend_route import default_backend, tpu_vm_signs
from conftest import REPO


def machine(tmp_path, devices=(), packages=(), wheels=()):
    dev, site = tmp_path / "dev", tmp_path / "site-packages"
    (dev / "vfio").mkdir(parents=True)
    site.mkdir()
    for name in devices:
        (dev / name).touch()
    for name in packages:                      # an importable package: a folder with __init__.py
        (site / name).mkdir()
        (site / name / "__init__.py").touch()
    for name in wheels:                        # an installed distribution: its dist-info folder
        info = site / f"{name.replace('-', '_')}-2.20.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 2.20.0\n")
    return dict(dev=str(dev), site_packages=[str(site)])


def test_a_cpu_machine_stays_on_tensorflow(tmp_path):
    assert default_backend(**machine(tmp_path, packages=["jax"]), environ={}) == ("tensorflow", "")


@pytest.mark.parametrize("sign", ["env", "accel0", "vfio/0", "libtpu"])
def test_a_tpu_vm_with_jax_and_no_tensorflow_tpu_takes_jax(tmp_path, sign):
    fake = machine(tmp_path, devices=[sign] if sign in ("accel0", "vfio/0") else [],
                   packages=["jax"] + (["libtpu"] if sign == "libtpu" else []))
    environ = {"TPU_ACCELERATOR_TYPE": "v5litepod-8"} if sign == "env" else {}
    backend, why = default_backend(**fake, environ=environ)
    assert backend == "jax" and "TPU VM" in why and "KERAS_BACKEND=tensorflow" in why
    assert len(tpu_vm_signs(**fake, environ=environ)) == 1


def test_tensorflow_tpu_keeps_tensorflow_and_no_jax_keeps_tensorflow(tmp_path):
    environ = {"TPU_ACCELERATOR_TYPE": "v4-8"}
    with_tf_tpu = machine(tmp_path / "a", devices=["accel0"], packages=["jax", "libtpu"], wheels=["tensorflow-tpu"])
    assert default_backend(**with_tf_tpu, environ=environ)[0] == "tensorflow"      # a Cloud TPU VM TF image
    without_jax = machine(tmp_path / "b", devices=["accel0"], packages=["libtpu"])
    assert default_backend(**without_jax, environ=environ)[0] == "tensorflow"      # TPUStrategy's errors apply


def test_keras_backend_overrides_the_route():
    """KERAS_BACKEND set: bert_keras leaves it alone, TPU VM signs or not (a new process: Keras' backend is fixed
    at import)."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TPU_ACCELERATOR_TYPE": "v5litepod-8"}
    run = subprocess.run([sys.executable, "-c", "import bert_keras, keras; print(keras.backend.backend())"],
                         capture_output=True, text=True, env=env, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "tensorflow" and "TPU VM" not in run.stdout
