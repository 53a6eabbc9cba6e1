"""What the trainer needs from a task kind: its data files, its task model, its loss and its official metric.

A task kind reads raw-text examples (bert_keras.data) and hands them to its task model as raw inputs and targets;
the model preprocesses them in tf.data (TaskModel.text_dataset), so training on a TPU keeps string ops on the
host. The names `bert-keras finetune --task` takes are in registry.py.
"""

from __future__ import annotations

import tensorflow as tf

from bert_keras.data.errors import DataFormatError


def some_examples(examples: list, path, layout: str) -> list:
    """`examples`, read from `path`, unless there are none: a file without examples is refused (a training set
    cannot train, and an evaluation set without examples is not "no evaluation set").

    Args:
        examples: what a reader returned.
        path: the file read.
        layout: what the file held instead, in the message (e.g. "a header line and no rows").

    Returns:
        `examples`.

    Raises:
        DataFormatError: no examples, naming the file.

    Example:
        >>> some_examples([], "dev.tsv", "a header line and no rows")
        Traceback (most recent call last):
        ...
        bert_keras.data.errors.DataFormatError: dev.tsv: holds no examples (a header line and no rows): name a file that holds at least one
    """
    if not examples:
        raise DataFormatError(path, None, f"holds no examples ({layout}): name a file that holds at least one")
    return examples


class Task:
    """A task kind. Subclasses set `name`, `metric_name`, `default_files` and implement the methods below."""
    name = ""
    metric_name = ""                 # the headline metric in evaluate()'s result (checkpoint selection, logs)
    default_files: tuple = ()        # (train, eval) file names in a --data folder
    uses_pooler = True               # False: the head reads the tokens, so the trainer freezes the unused pooler
    segments = 1                     # texts in one sequence: [CLS] a [SEP], or [CLS] a [SEP] b [SEP]

    def read(self, path: str) -> list:
        """The examples of one data file (bert_keras.data's readers); bad files raise naming file and line, and
        so does a file holding no examples (`some_examples`)."""
        raise NotImplementedError

    def read_training(self, path: str) -> list:
        """The examples of the training file: `read`'s, less those a task cannot train on (it says how many)."""
        return self.read(path)

    def min_seq_length(self) -> tuple[int, str]:
        """(the shortest sequence length the task can use, what it holds): [CLS], then a token and [SEP] for
        each text."""
        if self.segments == 1:
            return 3, "[CLS], a token, [SEP]"
        return 1 + 2 * self.segments, f"[CLS], then a token and [SEP] for each of its {self.segments} texts"

    def check_lengths(self, max_seq_length: int | None, seq_length: int | None = None) -> None:
        """Refuses a sequence length under `min_seq_length` (a model that would train on [CLS] and [SEP] alone).

        Args:
            max_seq_length: the --max-seq-length (None: not given).
            seq_length: the fixed --seq-length (None: not given).

        Raises:
            ValueError: naming the flag, the task and the minimum.

        Example:
            >>> from bert_keras.finetune.registry import get_task
            >>> get_task("mrpc").check_lengths(4)
            Traceback (most recent call last):
            ...
            ValueError: --max-seq-length 4 leaves no room for mrpc's input: give at least 5 ([CLS], then a token and [SEP] for each of its 2 texts)
        """
        need, holds = self.min_seq_length()
        for flag, value in (("--max-seq-length", max_seq_length), ("--seq-length", seq_length)):
            if value is not None and value < need:
                raise ValueError(f"{flag} {value} leaves no room for {self.name}'s input: give at least {need} "
                                 f"({holds})")

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
