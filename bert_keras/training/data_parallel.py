"""Training on Keras' JAX backend: data parallelism over JAX's devices with `keras.distribution`.

TPUs today run JAX (Colab's and Kaggle's TPU images ship no `tensorflow-tpu`; docs/tpu.md), so there a run is
`keras.distribution.DataParallel` over `jax.devices()`: the model's variables are replicated on every core, each
global batch from the host's `tf.data` pipeline is split along its first axis, and XLA sums the gradients. The
input pipeline stays one host-side `tf.data` of global batches (TensorFlow's default strategy: one replica), so
the TensorFlow strategies (`mirrored`, `multi_worker`, `TPUStrategy`) have no part here. On CPU,
`XLA_FLAGS=--xla_force_host_platform_device_count=8` simulates 8 devices (the tests' stand-in for a TPU's cores).

Several processes (a TPU pod slice's hosts, or machines with GPUs) join as one run when Keras' own variables say
so: KERAS_DISTRIBUTION_NUM_PROCESSES (> 1), with KERAS_DISTRIBUTION_JOB_ADDRESSES (the coordinator's host:port)
and KERAS_DISTRIBUTION_PROCESS_ID, or without them on a Cloud TPU pod, where JAX finds them. Every process runs
the same command and the same host pipeline of global batches, keeps its own slice of each (`local_batches`: the
batch's padded length is the global batch's, so every process hands JAX the same shapes), and JAX assembles the
global batch over all processes' devices. Process 0 writes the run's folder; the others write under it
(training.setup.output_folder).
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from bert_keras.backend_route import tpu_vm_signs

JAX_STRATEGIES = ("auto", "tpu", "cpu")


def start_data_parallel(strategy: str, batch_size: int) -> int:
    """Sets Keras' distribution for a JAX run -> the number of devices the batch is split over.

    Args:
        strategy: "auto" (every device JAX has: a TPU's cores, GPUs, simulated CPU devices), "tpu" (the same, an
            error unless JAX's devices are TPUs) or "cpu" (one device, no distribution).
        batch_size: the global batch size; it must divide over the devices.

    Raises:
        ValueError: a TensorFlow-only strategy, a batch that does not divide over the devices, or "cpu" in a run
            of several processes.
        RuntimeError: "tpu" when JAX has no TPU.

    Example:
        >>> start_data_parallel("cpu", 32)            # doctest: +SKIP
        1
    """
    import jax
    join_processes()
    if strategy not in JAX_STRATEGIES:
        raise ValueError(f"--strategy {strategy} is a TensorFlow strategy; on the JAX backend use auto (data "
                         "parallel over every JAX device), tpu or cpu, or run with --backend tensorflow")
    if strategy == "cpu" and jax.process_count() > 1:
        raise ValueError(f"--strategy cpu trains on one device, but this run has {jax.process_count()} processes "
                         "(KERAS_DISTRIBUTION_NUM_PROCESSES): use --strategy auto, or run one process")
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
    # Several processes: each feeds its slice of the global batch (local_batches), not Keras' rebatch-and-shard.
    keras.distribution.set_distribution(keras.distribution.DataParallel(
        devices=devices, auto_shard_dataset=jax.process_count() == 1))
    return len(devices)


def join_processes() -> int:
    """Joins this process to the run's others when KERAS_DISTRIBUTION_NUM_PROCESSES is above 1 (before JAX
    computes anything: jax.distributed.initialize through keras.distribution.initialize) -> the process count.

    Example:
        >>> os.environ.update(KERAS_DISTRIBUTION_JOB_ADDRESSES="10.0.0.1:1234",     # doctest: +SKIP
        ...                   KERAS_DISTRIBUTION_NUM_PROCESSES="2", KERAS_DISTRIBUTION_PROCESS_ID="1")
        >>> join_processes()                                                          # doctest: +SKIP
        2
    """
    import jax
    wanted = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", "1")
    if not wanted.isdigit() or int(wanted) < 1:
        raise ValueError(f"KERAS_DISTRIBUTION_NUM_PROCESSES={wanted!r}: give the number of processes of the run")
    if int(wanted) > 1 and not jax.distributed.is_initialized():
        keras.distribution.initialize()
    return jax.process_count()


def local_batches(dataset: tf.data.Dataset, global_batch_size: int) -> tf.data.Dataset:
    """Global batches -> this process's slice of each (rows [i * B / n, (i + 1) * B / n) of process i of n), or
    the dataset itself in a run of one process. Every process must build the same global batches (the same data,
    seed and order), and each batch must be whole (static_batches drops a partial last batch over several devices).

    Args:
        dataset: batches of tensors (any nest), global_batch_size rows each.
        global_batch_size: B; it must divide over the processes.

    Example:
        >>> data = local_batches(model.text_dataset(texts, labels, batch_size=32, training=True), 32)  # doctest: +SKIP
    """
    import jax
    count, index = jax.process_count(), jax.process_index()
    if count == 1:
        return dataset
    if global_batch_size % count:
        raise ValueError(f"batch size {global_batch_size} does not divide over {count} processes: use a multiple "
                         f"of {count}")
    rows = global_batch_size // count

    def take(*element):
        part = tf.nest.map_structure(lambda t: t[index * rows:(index + 1) * rows], element)
        return part if len(part) > 1 else part[0]
    return dataset.map(tf.autograph.experimental.do_not_convert(take), num_parallel_calls=tf.data.AUTOTUNE)
