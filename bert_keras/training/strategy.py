"""`--strategy auto|tpu|mirrored|multi_worker|cpu` -> a tf.distribute strategy.

auto: a TPU when one is named ($TPU_NAME, Colab's $COLAB_TPU_ADDR or --tpu), several GPUs -> MirroredStrategy,
else TF's default strategy. TPUs are resolved with TPUClusterResolver (a name, or grpc://host:port).
multi_worker needs TF_CONFIG, as every MultiWorkerMirroredStrategy job does.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.parse

import tensorflow as tf

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker", "cpu")


def _unreachable(tpu: str, reason) -> RuntimeError:
    return RuntimeError(
        f"No TPU reachable at {tpu or 'the default address'} ({reason}). On Colab choose a TPU runtime; elsewhere "
        "pass --tpu NAME or grpc://HOST:8470, or use --strategy cpu|mirrored.")


def _tpu_strategy(tpu: str | None):
    if tpu and tpu.startswith("grpc://"):
        # TF retries an unreachable gRPC master for minutes: check the port answers before handing it over.
        address = urllib.parse.urlparse(tpu)
        try:
            socket.create_connection((address.hostname, address.port or 8470), timeout=5).close()
        except OSError as e:
            raise _unreachable(tpu, e) from None
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, OSError, urllib.error.URLError, tf.errors.OpError) as e:
        raise _unreachable(tpu, str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    return tf.distribute.TPUStrategy(resolver)


def create_strategy(name: str = "auto", tpu: str | None = None) -> tf.distribute.Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    if name == "auto":
        colab = os.environ.get("COLAB_TPU_ADDR")
        tpu = tpu or os.environ.get("TPU_NAME") or (f"grpc://{colab}" if colab else None)
        if tpu:
            return _tpu_strategy(tpu)
        if len(tf.config.list_logical_devices("GPU")) > 1:
            return tf.distribute.MirroredStrategy()
        return tf.distribute.get_strategy()
    if name == "tpu":
        return _tpu_strategy(tpu)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if not os.environ.get("TF_CONFIG"):
            raise RuntimeError("--strategy multi_worker needs TF_CONFIG (cluster workers and this task's index).")
        json.loads(os.environ["TF_CONFIG"])
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.OneDeviceStrategy("/cpu:0")
