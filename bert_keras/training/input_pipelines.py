"""One input pipeline per host: what a TPU pod slice or a multi-worker job needs from tf.data.

    data = distributed_input(strategy, make_dataset, global_batch_size)

`make_dataset(shard, num_shards, batch_size)` builds the dataset of one pipeline: the `shard`-th of `num_shards`
disjoint parts of the data, in batches of `batch_size` (the per-replica batch). Under a distribution strategy
each host calls it once through `strategy.distribute_datasets_from_function`, with the InputContext's pipeline id,
pipeline count and global batch / replicas, so a v4-32's four hosts each read a quarter of the data instead of
all of it. With one device (the default strategy) it is `make_dataset(0, 1, global_batch_size)`, unchanged.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from bert_keras.backends import on_tensorflow


def is_distributed(strategy) -> bool:
    return strategy.num_replicas_in_sync > 1 or strategy.extended._in_multi_worker_mode()


def distributed_input(strategy, make_dataset: Callable[[int, int, int], tf.data.Dataset], global_batch_size: int):
    if not on_tensorflow():          # JAX: each process's slice of the global batches (data_parallel.py)
        from bert_keras.training.data_parallel import local_batches
        return local_batches(make_dataset(0, 1, global_batch_size), global_batch_size)
    if not is_distributed(strategy):
        return make_dataset(0, 1, global_batch_size)
    if global_batch_size % strategy.num_replicas_in_sync:
        raise ValueError(f"batch size {global_batch_size} does not divide over {strategy.num_replicas_in_sync} "
                         "replicas: use a multiple of the replica count")

    def per_pipeline(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(context.input_pipeline_id, context.num_input_pipelines,
                            context.get_per_replica_batch_size(global_batch_size))
    return strategy.distribute_datasets_from_function(per_pipeline)
