"""Training on Keras' JAX backend: data parallelism over JAX's devices with `keras.distribution`.

TPUs today run JAX (Colab's and Kaggle's TPU images ship no `tensorflow-tpu`; docs/tpu.md), so there a run is
`keras.distribution.DataParallel` over `jax.devices()`: the model's variables are replicated on every core, each
global batch from the host's `tf.data` pipeline is split along its first axis, and XLA sums the gradients. The
input pipeline stays one host-side `tf.data` of global batches (TensorFlow's default strategy: one replica), so
the TensorFlow strategies (`mirrored`, `multi_worker`, `TPUStrategy`) have no part here. On CPU,
`XLA_FLAGS=--xla_force_host_platform_device_count=8` simulates 8 devices (the tests' stand-in for a TPU's cores).
"""

from __future__ import annotations

import keras

from bert_keras.backend_route import tpu_vm_signs

JAX_STRATEGIES = ("auto", "tpu", "cpu")


def start_data_parallel(strategy: str, batch_size: int) -> int:
    """Sets Keras' distribution for a JAX run -> the number of devices the batch is split over.

    Args:
        strategy: "auto" (every device JAX has: a TPU's cores, GPUs, simulated CPU devices), "tpu" (the same, an
            error unless JAX's devices are TPUs) or "cpu" (one device, no distribution).
        batch_size: the global batch size; it must divide over the devices.

    Raises:
        ValueError: a TensorFlow-only strategy, or a batch that does not divide over the devices.
        RuntimeError: "tpu" when JAX has no TPU.

    Example:
        >>> start_data_parallel("cpu", 32)            # doctest: +SKIP
        1
    """
    import jax
    if strategy not in JAX_STRATEGIES:
        raise ValueError(f"--strategy {strategy} is a TensorFlow strategy; on the JAX backend use auto (data "
                         "parallel over every JAX device), tpu or cpu, or run with --backend tensorflow")
    devices = jax.devices()
    signs = tpu_vm_signs() if strategy != "cpu" else []
    if (strategy == "tpu" or signs) and devices[0].platform != "tpu":
        why = f"this is a TPU VM ({'; '.join(signs)})" if signs else "--strategy tpu"
        raise RuntimeError(f"{why}, but JAX sees no TPU (its devices: {devices[0].platform} x {len(devices)}), "
                           "so it would train on the CPU. Install JAX's TPU build: pip install -U 'jax[tpu]' (Colab "
                           "and Kaggle TPU images have it; in a notebook restart the runtime after), check no other "
                           "process holds the TPU, or choose a TPU runtime; --strategy cpu trains on the CPU.")
    if strategy == "cpu" or len(devices) == 1:
        keras.distribution.set_distribution(None)
        return 1
    if batch_size % len(devices):
        raise ValueError(f"batch size {batch_size} does not divide over {len(devices)} {devices[0].platform} "
                         f"devices: use a multiple of {len(devices)}")
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
    return len(devices)
