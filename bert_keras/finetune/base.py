"""What the trainer needs from a task kind: its data files, its task model, its loss and its official metric.

A task kind reads raw-text examples (bert_keras.data) and hands them to its task model as raw inputs and targets;
the model preprocesses them in tf.data (TaskModel.text_dataset), so training on a TPU keeps string ops on the
host. The names `bert-keras finetune --task` takes are in registry.py.
"""

from __future__ import annotations

import tensorflow as tf


class Task:
    """A task kind. Subclasses set `name`, `metric_name`, `default_files` and implement the methods below."""
    name = ""
    metric_name = ""                 # the headline metric in evaluate()'s result (checkpoint selection, logs)
    default_files: tuple = ()        # (train, eval) file names in a --data folder
    uses_pooler = True               # False: the head reads the tokens, so the trainer freezes the unused pooler

    def read(self, path: str) -> list:
        """The examples of one data file (bert_keras.data's readers); bad files raise naming file and line."""
        raise NotImplementedError

    def build_model(self, encoder, preprocessor, examples: list):
        """The task model over `encoder`, owning `preprocessor`; `examples` (training set) fix label sets."""
        raise NotImplementedError

    def inputs(self, examples: list) -> tuple:
        """(raw inputs, targets) of `examples`, as the task model's fit takes them."""
        raise NotImplementedError

    def compile_args(self) -> dict:
        """Keras compile arguments besides the optimizer: loss and metrics."""
        raise NotImplementedError

    def evaluate(self, model, examples: list, batch_size: int) -> dict:
        """Predict `examples` and score them with the task's official metric."""
        raise NotImplementedError

    def training_sequences(self, examples: list, model) -> int:
        """How many sequences one pass over `examples` trains on: one per example (SQuAD: its windows)."""
        return len(examples)

    def dataset(self, examples: list, model, batch_size: int, training: bool, seed: int = 0,
                drop_remainder: bool | None = None) -> tf.data.Dataset:
        """Batches of (id dict, targets), preprocessed on the host by the model's own preprocessor; the last
        partial batch is dropped when `drop_remainder` (None: when training, the recipe's and a TPU's static
        batch; the trainer passes False unless the shapes must be static)."""
        return model.text_dataset(*self.inputs(examples), batch_size=batch_size, training=training, seed=seed,
                                  drop_remainder=training if drop_remainder is None else drop_remainder)
