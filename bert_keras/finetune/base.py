"""What the trainer needs from a task kind, and the registry of task names (`bert-keras finetune --task`)."""

from __future__ import annotations

import tensorflow as tf


class Task:
    """A task kind. Subclasses set `name` and implement the five methods below.

    Examples are the raw-text dataclasses of bert_keras.data; batches are (id dict, labels) with the id dict made
    in tf.data by the BertPreprocessor, so training on a TPU keeps string ops on the host.
    """
    name = ""
    metric_name = ""                 # the headline metric in evaluate()'s result (checkpoint selection, logs)

    def read(self, path: str) -> list:
        raise NotImplementedError

    def build_model(self, encoder, examples: list):
        """The task model over `encoder`; `examples` (training set) fix label sets where there are any."""
        raise NotImplementedError

    def dataset(self, examples: list, preprocessor, batch_size: int, training: bool, seed: int = 0
                ) -> tf.data.Dataset:
        raise NotImplementedError

    def compile_args(self) -> dict:
        """Keras compile arguments besides the optimizer: loss and metrics."""
        raise NotImplementedError

    def evaluate(self, model, examples: list, preprocessor, batch_size: int) -> dict:
        """Predict `examples` and score them with the task's official metric."""
        raise NotImplementedError

    def export_args(self) -> dict:
        """What an export of the trained model must know besides the model (written to task.json)."""
        return {}


def batched_texts(columns: tuple, labels, batch_size: int, training: bool, seed: int, preprocessor,
                  shuffle_buffer: int = 10_000) -> tf.data.Dataset:
    """(text columns, labels) -> batches of (preprocessor(texts), labels), preprocessing on the host in tf.data.

    Each batch is padded to its own longest sequence (a multiple of 8) unless the preprocessor has a fixed
    seq_length: short sentences are not padded to 128. Training data is shuffled every epoch and the last
    partial batch dropped (static batch size, as TPUs need); evaluation keeps every example in order.
    """
    ds = tf.data.Dataset.from_tensor_slices((columns, labels))
    if training:
        ds = ds.shuffle(min(len(labels), shuffle_buffer), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=training)
    one = len(columns) == 1
    ds = ds.map(lambda x, y: (preprocessor(x[0] if one else tuple(x)), y), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


TASKS: dict[str, type] = {}


def register(*names):
    def wrap(cls):
        for name in names:
            TASKS[name] = cls
        return cls
    return wrap


def get_task(name: str, **kwargs) -> Task:
    import bert_keras.finetune.classification  # noqa: F401  (each module registers its task names)
    import bert_keras.finetune.multiple_choice  # noqa: F401
    import bert_keras.finetune.squad  # noqa: F401
    import bert_keras.finetune.tagging  # noqa: F401
    key = name.strip().lower()
    if key not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}")
    return TASKS[key](key, **kwargs)
