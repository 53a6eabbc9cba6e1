"""Sentence and sentence-pair classification (GLUE), and regression (STS-B) with num_classes=1.

Head: dropout + dense on the pooled [CLS] vector, as google-research/bert's run_classifier.py.
Inputs: the encoder's id dict ([B, S] each). Output: logits [B, num_classes] (float32, also under mixed precision).
"""

from __future__ import annotations

import keras

from bert_keras.tasks.base import TaskModel, dense_head, id_inputs


@keras.saving.register_keras_serializable(package="bert_keras")
class BertClassifier(TaskModel):
    def __init__(self, encoder, num_classes: int, dropout: float = 0.1, label_names=None, name=None):
        """`label_names` (one string per class, or None for regression) travel in the config, so an export
        or a notebook holding only the `.keras` file can name its predictions."""
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"{len(label_names)} label_names for {num_classes} classes: give one name per class")
        inputs = id_inputs()
        pooled = encoder(inputs, pooled_only=True)
        logits = dense_head(num_classes, encoder.config.initializer_range, "logits")(
            keras.layers.Dropout(dropout, name="head_dropout")(pooled))
        super().__init__(inputs, logits, encoder, name=name, num_classes=num_classes, dropout=dropout,
                         label_names=list(label_names) if label_names is not None else None)

