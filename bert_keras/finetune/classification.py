"""GLUE classification and STS-B regression: sentence or sentence pair -> class (or score) from [CLS].

Loss: softmax cross-entropy on the logits (mean squared error for STS-B's one output).
Metrics: GLUE's per task (accuracy; F1 for MRPC/QQP; Matthews for CoLA; Pearson/Spearman for STS-B).
"""

from __future__ import annotations

import keras
import numpy as np

from bert_keras.data import read_glue
from bert_keras.finetune.base import Task, batched_texts, register
from bert_keras.metrics.glue import glue_metric_names, glue_metrics
from bert_keras.tasks import BertClassifier


@register("cola", "sst-2", "sst2", "mrpc", "qqp", "mnli", "qnli", "rte", "wnli", "sts-b", "stsb")
class ClassificationTask(Task):
    default_files = ("train.tsv", "dev.tsv")

    def __init__(self, name: str):
        self.name = name
        self.label_names = None
        self.regression = name in ("sts-b", "stsb")
        self.metric_name = glue_metric_names(name)[0]

    def read(self, path):
        examples, self.label_names = read_glue(self.name, path)
        self.segments = 1 if not examples or examples[0].text_b is None else 2
        return examples

    def export_args(self):
        return {"segments": self.segments}

    def build_model(self, encoder, examples):
        if self.regression:
            return BertClassifier(encoder, num_classes=1)
        return BertClassifier(encoder, num_classes=len(self.label_names), label_names=self.label_names)

    def _columns(self, examples):
        a = [e.text_a for e in examples]
        return (a,) if examples[0].text_b is None else (a, [e.text_b for e in examples])

    def dataset(self, examples, preprocessor, batch_size, training, seed=0):
        labels = np.array([e.label if e.label is not None else -1 for e in examples],
                          "float32" if self.regression else "int32")
        return batched_texts(self._columns(examples), labels, batch_size, training, seed, preprocessor)

    def compile_args(self):
        if self.regression:
            return {"loss": keras.losses.MeanSquaredError(), "metrics": []}
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def predict(self, model, examples, preprocessor, batch_size):
        """Logits [N, classes] for `examples`, in order."""
        return model.predict(self.dataset(examples, preprocessor, batch_size, training=False).map(lambda x, y: x),
                             verbose=0)

    def evaluate(self, model, examples, preprocessor, batch_size):
        logits = self.predict(model, examples, preprocessor, batch_size)
        predictions = logits[:, 0] if self.regression else logits.argmax(-1)
        return glue_metrics(self.name, [e.label for e in examples], predictions)
