"""Multiple choice (SWAG csv, OpenBookQA / ARC / CommonsenseQA jsonl): each (context, ending) pair is one sequence,
inputs [B, C, S], one shared scorer over [CLS], softmax over the C choices. Metric: accuracy."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_keras.data import read_choice_jsonl, read_swag
from bert_keras.finetune.base import Task, register
from bert_keras.metrics.glue import accuracy
from bert_keras.tasks import BertMultipleChoice


@register("swag", "openbookqa", "arc", "commonsenseqa", "multiple_choice")
class MultipleChoiceTask(Task):
    metric_name = "accuracy"
    default_files = {"swag": ("train.csv", "val.csv"), "openbookqa": ("train.jsonl", "dev.jsonl"),
                     "commonsenseqa": ("train_rand_split.jsonl", "dev_rand_split.jsonl")}

    def __init__(self, name: str):
        self.name = name
        self.default_files = self.default_files.get(name, ("train.jsonl", "dev.jsonl"))

    def read(self, path):
        examples = read_swag(path) if str(path).endswith(".csv") else read_choice_jsonl(path)
        counts = {len(e.endings) for e in examples}
        if len(counts) > 1:
            raise ValueError(f"{path}: examples have different numbers of choices {sorted(counts)}; "
                             "keep one count per file (read_choice_jsonl(path, num_choices=N) filters)")
        return examples

    def build_model(self, encoder, examples):
        return BertMultipleChoice(encoder)

    def dataset(self, examples, preprocessor, batch_size, training, seed=0):
        contexts = np.array([[e.context] * len(e.endings) for e in examples], object)
        endings = np.array([list(e.endings) for e in examples], object)
        labels = np.array([e.label if e.label is not None else -1 for e in examples], "int32")
        ds = tf.data.Dataset.from_tensor_slices(((contexts.astype(str), endings.astype(str)), labels))
        if training:
            ds = ds.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
        ds = ds.batch(batch_size, drop_remainder=training)
        ds = ds.map(lambda x, y: (preprocessor(x), y), num_parallel_calls=tf.data.AUTOTUNE)
        return ds.prefetch(tf.data.AUTOTUNE)

    def compile_args(self):
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def evaluate(self, model, examples, preprocessor, batch_size):
        logits = model.predict(self.dataset(examples, preprocessor, batch_size, False).map(lambda x, y: x),
                               verbose=0)
        return {"accuracy": accuracy([e.label for e in examples], logits.argmax(-1))}
