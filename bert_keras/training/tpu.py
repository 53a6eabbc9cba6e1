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

import glob
import importlib.util
import os
import socket
import urllib.error
import urllib.parse

import tensorflow as tf

from bert_keras.training import tpu_install

DEV = "/dev"                         # where the TPU device files are (tests point it elsewhere)
WHEELS_PATH = None                   # where installed wheels are looked up (None: sys.path; tests point it elsewhere)
INSTALL = f"pip install tensorflow-tpu=={tf.__version__}"


def tpu_vm_signs() -> list[str]:
    """The signs that this machine is a TPU VM, described for an error message (empty: none)."""
    signs = [f"${var}={os.environ[var]}" for var in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID") if var in os.environ]
    devices = sorted(glob.glob(os.path.join(DEV, "accel*")) +
                     [p for p in glob.glob(os.path.join(DEV, "vfio", "*")) if os.path.basename(p).isdigit()])
    if devices:
        signs.append(f"device files {', '.join(devices)}")
    if libtpu_installed():
        signs.append("libtpu is installed")
    return signs


def libtpu_installed() -> bool:
    return importlib.util.find_spec("libtpu") is not None


def tensorflow_tpu_installed() -> bool:
    return tpu_install.find_wheel(tpu_install.TPU_WHEEL, WHEELS_PATH) is not None


def _accelerator() -> str:
    return os.environ.get("TPU_ACCELERATOR_TYPE", "TPU (type unknown: $TPU_ACCELERATOR_TYPE is not set)")


def _connect(resolver):
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def tpu_vm_strategy(signs: list[str]) -> tf.distribute.TPUStrategy:
    """TPUStrategy on this TPU VM's own TPU, or a RuntimeError that says why not and what to do."""
    accelerator, seen = _accelerator(), "; ".join(signs)
    if not (libtpu_installed() and tensorflow_tpu_installed()):
        raise RuntimeError(
            f"This machine is a TPU VM ({accelerator}; seen: {seen}) but this TensorFlow cannot use the TPU: the "
            f"`tensorflow-tpu` wheel (with libtpu) is not installed. Install it with `{INSTALL}` (in a notebook: "
            "%pip install ..., then restart the runtime), or train on the CPU with --strategy cpu.")
    overwritten = tpu_install.overwritten_tpu_build(WHEELS_PATH)
    if overwritten:
        raise RuntimeError(f"This machine is a TPU VM ({accelerator}; seen: {seen}) but this TensorFlow cannot use "
                           f"the TPU: {overwritten}.")
    try:
        return _connect(tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local"))
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


def named_tpu_strategy(tpu: str) -> tf.distribute.TPUStrategy:
    """A Cloud TPU by name (a pod slice too) or a grpc://host:port address (the legacy TPU-Node runtime)."""
    if tpu.startswith("grpc://"):
        # TF retries an unreachable gRPC master for minutes: check the port answers before handing it over.
        address = urllib.parse.urlparse(tpu)
        try:
            socket.create_connection((address.hostname, address.port or 8470), timeout=5).close()
        except OSError as e:
            raise _unreachable(tpu, e) from None
    try:
        return _connect(tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu))
    except (ValueError, RuntimeError, OSError, urllib.error.URLError, tf.errors.OpError) as e:
        raise _unreachable(tpu, str(e).splitlines()[0] if str(e) else type(e).__name__) from None
