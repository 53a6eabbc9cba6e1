"""Multiple choice (SWAG csv, OpenBookQA / ARC / CommonsenseQA jsonl): each (context, ending) pair is one sequence,
inputs [B, C, S], one shared scorer over [CLS], softmax over the C choices. Metric: accuracy."""

from __future__ import annotations

import keras
import numpy as np

from bert_keras.data import read_choice_jsonl, read_swag
from bert_keras.finetune.base import Task, some_examples
from bert_keras.metrics.glue import accuracy
from bert_keras.tasks import BertMultipleChoice


class MultipleChoiceTask(Task):
    """SWAG, OpenBookQA, ARC and CommonsenseQA: a BertMultipleChoice, accuracy."""

    metric_name = "accuracy"
    segments = 2                      # the context, then one ending
    default_files = {"swag": ("train.csv", "val.csv"), "openbookqa": ("train.jsonl", "dev.jsonl"),
                     "commonsenseqa": ("train_rand_split.jsonl", "dev_rand_split.jsonl")}

    def __init__(self, name: str):
        self.name = name
        self.default_files = self.default_files.get(name, ("train.jsonl", "dev.jsonl"))

    def read(self, path):
        swag = str(path).endswith(".csv")
        examples = some_examples(read_swag(path) if swag else read_choice_jsonl(path), path,
                                 "a header line and no rows" if swag else "no question lines")
        counts = {len(e.endings) for e in examples}
        if len(counts) > 1:
            raise ValueError(f"{path}: examples have different numbers of choices {sorted(counts)}; "
                             "keep one count per file (read_choice_jsonl(path, num_choices=N) filters)")
        return examples

    def build_model(self, encoder, preprocessor, examples):
        return BertMultipleChoice(encoder, preprocessor=preprocessor)

    def inputs(self, examples):
        x = (np.array([e.context for e in examples], object).astype(str),
             np.array([list(e.endings) for e in examples], object).astype(str))
        return x, np.array([e.label if e.label is not None else -1 for e in examples], "int32")

    def compile_args(self):
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def evaluate(self, model, examples, batch_size):
        logits = np.concatenate([out["logits"] for out in model.serve_batches(*self.inputs(examples)[0],
                                                                                batch_size=batch_size)])
        return {"accuracy": accuracy([e.label for e in examples], logits.argmax(-1))}
