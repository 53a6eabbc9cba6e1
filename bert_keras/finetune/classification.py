"""GLUE classification and STS-B regression: sentence or sentence pair -> class (or score) from [CLS].

Loss: softmax cross-entropy on the logits (mean squared error for STS-B's one output).
Metrics: GLUE's per task (accuracy; F1 for MRPC/QQP; Matthews for CoLA; Pearson/Spearman for STS-B).
"""

from __future__ import annotations

import keras
import numpy as np

from bert_keras.data import read_glue
from bert_keras.data.glue import glue_segments
from bert_keras.finetune.base import Task, some_examples
from bert_keras.metrics.glue import glue_metric_names, glue_metrics
from bert_keras.tasks import BertClassifier


class ClassificationTask(Task):
    """GLUE tasks (and STS-B regression) from their TSV files: a BertClassifier, GLUE's official metrics."""

    default_files = ("train.tsv", "dev.tsv")

    def __init__(self, name: str):
        self.name = name
        self.label_names = None
        self.regression = name in ("sts-b", "stsb")
        self.metric_name = glue_metric_names(name)[0]
        self.segments = glue_segments(name)

    def read(self, path):
        examples, self.label_names = read_glue(self.name, path)
        return some_examples(examples, path, "a header line and no rows")

    def build_model(self, encoder, preprocessor, examples):
        segments = 1 if not examples or examples[0].text_b is None else 2
        if self.regression:
            return BertClassifier(encoder, num_classes=1, preprocessor=preprocessor, segments=segments)
        return BertClassifier(encoder, num_classes=len(self.label_names), label_names=self.label_names,
                              preprocessor=preprocessor, segments=segments)

    def inputs(self, examples):
        a = [e.text_a for e in examples]
        x = a if examples[0].text_b is None else (a, [e.text_b for e in examples])
        y = np.array([e.label if e.label is not None else -1 for e in examples],
                     "float32" if self.regression else "int32")
        return x, y

    def compile_args(self):
        if self.regression:
            return {"loss": keras.losses.MeanSquaredError(), "metrics": []}
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def evaluate(self, model, examples, batch_size):
        x = self.inputs(examples)[0]
        logits = np.concatenate([out["logits"] for out in model.serve_batches(
            *(x if isinstance(x, tuple) else (x,)), batch_size=batch_size)])
        predictions = logits[:, 0] if self.regression else logits.argmax(-1)
        return glue_metrics(self.name, [e.label for e in examples], predictions)
