"""Which Keras backend a process should use when nobody said: JAX on a TPU VM without TensorFlow's TPU build.

TPUs today run JAX: Colab's TPU runtimes dropped TensorFlow (googlecolab/colabtools#5164), Kaggle's TPU image
installs `tensorflow-cpu` beside `jax[tpu]` and never `tensorflow-tpu`, and Keras tests TPUs on JAX only
(docs/tpu.md). So on a machine with TPU VM signs ($TPU_ACCELERATOR_TYPE or $TPU_WORKER_ID, /dev/accel*,
/dev/vfio/<n>, libtpu importable), JAX installed and no `tensorflow-tpu` wheel, bert_keras picks Keras' JAX backend
(the host's tf.data still tokenizes, on the CPU). With `tensorflow-tpu` installed (Cloud TPU VM images with TF
2.19/2.20) it stays on TensorFlow and its TPUStrategy. `KERAS_BACKEND` (or `bert-keras --backend`) overrides both.

Standard library only: `bert_keras/__init__.py` runs this before anything imports Keras, which fixes the backend.
"""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.metadata
import importlib.util
import os


def _find_spec(name: str, site_packages: list[str] | None):
    if site_packages is None:
        return importlib.util.find_spec(name)
    return importlib.machinery.PathFinder.find_spec(name, list(site_packages))


def tpu_device_files(dev: str = "/dev") -> list[str]:
    """The TPU device files present: dev/accel* (TPU v2-v4) and dev/vfio/<n> (v5e and later; not the container)."""
    return sorted(glob.glob(os.path.join(dev, "accel*")) +
                  [p for p in glob.glob(os.path.join(dev, "vfio", "*")) if os.path.basename(p).isdigit()])


def installed(module: str, site_packages: list[str] | None = None) -> bool:
    """Is `module` importable (from `site_packages`; default: this Python's import path)?"""
    return _find_spec(module, site_packages) is not None


def wheel_installed(name: str, site_packages: list[str] | None = None) -> bool:
    """Is the distribution `name` (e.g. "tensorflow-tpu") installed on `site_packages` (default: sys.path)?"""
    where = {} if site_packages is None else {"path": list(site_packages)}
    return next(iter(importlib.metadata.distributions(name=name, **where)), None) is not None


def tpu_vm_signs(dev: str = "/dev", site_packages: list[str] | None = None, environ=None) -> list[str]:
    """The signs that this machine is a TPU VM, described for a message (empty: none).

    Args:
        dev: where the device files are.
        site_packages: folders to look for libtpu in; None: this Python's import path.
        environ: the environment (default os.environ).

    Example:
        >>> tpu_vm_signs(dev="/nonexistent", site_packages=[], environ={"TPU_ACCELERATOR_TYPE": "v5litepod-8"})
        ['$TPU_ACCELERATOR_TYPE=v5litepod-8']
    """
    environ = os.environ if environ is None else environ
    signs = [f"${var}={environ[var]}" for var in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID") if var in environ]
    devices = tpu_device_files(dev)
    if devices:
        signs.append(f"device files {', '.join(devices)}")
    if installed("libtpu", site_packages):
        signs.append("libtpu is installed")
    return signs


def default_backend(dev: str = "/dev", site_packages: list[str] | None = None, environ=None) -> tuple[str, str]:
    """(backend, why): "jax" on a TPU VM with JAX installed and no tensorflow-tpu, else "tensorflow".

    Example:
        >>> default_backend(dev="/nonexistent", site_packages=[], environ={})
        ('tensorflow', '')
    """
    signs = tpu_vm_signs(dev, site_packages, environ)
    if not signs or wheel_installed("tensorflow-tpu", site_packages) or not installed("jax", site_packages):
        return "tensorflow", ""
    return "jax", (f"a TPU VM ({'; '.join(signs)}) with JAX and without tensorflow-tpu: Keras' JAX backend "
                   "(set KERAS_BACKEND=tensorflow for TensorFlow's)")
