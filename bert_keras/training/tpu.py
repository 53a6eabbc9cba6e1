"""Finding and connecting the TPU: TPU VMs (Colab, Kaggle, Cloud TPU today), named Cloud TPUs, the legacy address.

A TPU VM has the TPU on the machine itself: TensorFlow reaches it with `TPUClusterResolver(tpu="local")` and needs
the `tensorflow-tpu` wheel (it brings `libtpu`). Its signs, any of which counts:
  $TPU_ACCELERATOR_TYPE (e.g. v2-8, v5litepod-1) or $TPU_WORKER_ID, which TPU VM images export;
  /dev/accel* (TPU v2-v4 chips) or /dev/vfio/<n> (v5e and later);
  `libtpu` importable.
A sign that cannot be acted on is an error that names the TPU type and the fix, never a silent CPU run:
no tensorflow-tpu -> the install command; tensorflow-tpu installed but the CPU `tensorflow` wheel's files on disk
(both write tensorflow/: tpu_install.py reads their RECORDs) -> the force-reinstall command; the TPU held by another
process -> restart the runtime; any other initialisation error -> the error itself. $TPU_NAME names a Cloud TPU (a pod slice too); Colab's retired TPU-Node
runtime set $COLAB_TPU_ADDR (a grpc address), which is still honoured.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import urllib.error
import urllib.parse
from typing import Callable

import tensorflow as tf

from bert_keras import backend_route
from bert_keras.training import tpu_install

INSTALL = tpu_install.install_command(tf.__version__)


def connect_tpu(resolver) -> tf.distribute.TPUStrategy:
    """Connects to the TPU `resolver` finds and initialises it -> TPUStrategy (TensorFlow's own steps)."""
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


@dataclasses.dataclass(frozen=True)
class TpuHost:
    """Where a TPU VM's signs are looked for and how its TPU is connected: this machine by default.

    `create_strategy(..., host=TpuHost(...))` describes another machine: a folder of device files, a
    site-packages of installed wheels, a connect step (the tests use a temporary folder of fake devices and fake
    wheels, and a connect that fails as a busy TPU does).

    Args:
        dev: str. Where the device files are (`accel*`: TPU v2-v4; `vfio/<n>`: v5e and later). Default "/dev".
        site_packages: list of str or None. Folders where installed wheels (tensorflow-tpu, tensorflow) and the
            `libtpu` package are looked up; None: this Python's import path (sys.path).
        connect: callable(TPUClusterResolver) -> TPUStrategy. Connects and initialises the TPU (default:
            `connect_tpu`, TensorFlow's experimental_connect_to_cluster and initialize_tpu_system).

    Example:
        >>> host = TpuHost()
        >>> host.dev, host.site_packages is None
        ('/dev', True)
    """
    dev: str = "/dev"
    site_packages: list[str] | None = None
    connect: Callable[..., tf.distribute.TPUStrategy] = connect_tpu

    def device_files(self) -> list[str]:
        """The TPU device files present: dev/accel* and dev/vfio/<n> (not the VFIO container device)."""
        return backend_route.tpu_device_files(self.dev)

    def libtpu_installed(self) -> bool:
        return backend_route.installed("libtpu", self.site_packages)

    def jax_installed(self) -> bool:
        return backend_route.installed("jax", self.site_packages)

    def tensorflow_tpu_installed(self) -> bool:
        return tpu_install.find_wheel(tpu_install.TPU_WHEEL, self.site_packages) is not None


def tpu_vm_signs(host: TpuHost = TpuHost()) -> list[str]:
    """The signs that `host` (default: this machine) is a TPU VM, described for an error message (empty: none)."""
    return backend_route.tpu_vm_signs(host.dev, host.site_packages)


def _accelerator() -> str:
    return os.environ.get("TPU_ACCELERATOR_TYPE", "TPU (type unknown: $TPU_ACCELERATOR_TYPE is not set)")


def tpu_vm_strategy(signs: list[str], host: TpuHost = TpuHost()) -> tf.distribute.TPUStrategy:
    """TPUStrategy on this TPU VM's own TPU, or a RuntimeError that says why not and what to do."""
    accelerator, seen = _accelerator(), "; ".join(signs)
    if not host.tensorflow_tpu_installed() and host.jax_installed():
        raise RuntimeError(
            f"This machine is a TPU VM ({accelerator}; seen: {seen}) with JAX and without TensorFlow's TPU build: "
            "train on Keras' JAX backend, which is how TPUs run today (Colab and Kaggle ship no tensorflow-tpu). "
            "Run with --backend jax, or set KERAS_BACKEND=jax before Python imports Keras (in a notebook: "
            "os.environ['KERAS_BACKEND'] = 'jax' in the first cell); docs/tpu.md.")
    if not (host.libtpu_installed() and host.tensorflow_tpu_installed()):
        raise RuntimeError(
            f"This machine is a TPU VM ({accelerator}; seen: {seen}) but this TensorFlow cannot use the TPU: the "
            f"`tensorflow-tpu` wheel (with libtpu) is not installed. TPUs today run on Keras' JAX backend: "
            "pip install -U 'jax[tpu]', then --backend jax (docs/tpu.md); for TensorFlow's TPU route install "
            f"`{INSTALL}` (in a notebook: %pip install ..., then restart the runtime), or train on the CPU with "
            "--strategy cpu.")
    overwritten = tpu_install.overwritten_tpu_build(host.site_packages)
    if overwritten:
        raise RuntimeError(f"This machine is a TPU VM ({accelerator}; seen: {seen}) but this TensorFlow cannot use "
                           f"the TPU: {overwritten}.")
    try:
        return host.connect(tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local"))
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if any(word in str(e).lower() for word in ("in use", "busy", "already")):
            fix = ("another process holds the TPU (a previous notebook kernel or run): restart the runtime, or end "
                   "that process (`sudo lsof -w /dev/accel* /dev/vfio/*` shows it)")
        else:
            fix = (f"check that tensorflow-tpu and libtpu match TensorFlow {tf.__version__} (`{INSTALL}`), then "
                   "restart the runtime")
        raise RuntimeError(f"The TPU of this TPU VM ({accelerator}; seen: {seen}) did not initialise: {message}. "
                           f"Fix: {fix}.") from e


def _unreachable(tpu: str, reason) -> RuntimeError:
    return RuntimeError(
        f"No TPU reachable at {tpu or 'the default address'} ({reason}). On a TPU VM (Colab, Kaggle, Cloud TPU VM) "
        f"leave --tpu unset; for a Cloud TPU pass --tpu NAME or grpc://HOST:8470; or use --strategy cpu|mirrored.")


def named_tpu_strategy(tpu: str, host: TpuHost = TpuHost()) -> tf.distribute.TPUStrategy:
    """A Cloud TPU by name (a pod slice too) or a grpc://host:port address (the legacy TPU-Node runtime)."""
    if tpu.startswith("grpc://"):
        # TF retries an unreachable gRPC master for minutes: check the port answers before handing it over.
        address = urllib.parse.urlparse(tpu)
        try:
            socket.create_connection((address.hostname, address.port or 8470), timeout=5).close()
        except OSError as e:
            raise _unreachable(tpu, e) from None
    try:
        return host.connect(tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu))
    except (ValueError, RuntimeError, OSError, urllib.error.URLError, tf.errors.OpError) as e:
        raise _unreachable(tpu, str(e).splitlines()[0] if str(e) else type(e).__name__) from None
