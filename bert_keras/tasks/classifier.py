"""Sentence and sentence-pair classification (GLUE), and regression (STS-B) with num_classes=1.

Head: dropout + dense on the pooled [CLS] vector, as google-research/bert's run_classifier.py.
Inputs: the encoder's id dict ([B, S] each). Output: logits [B, num_classes] (float32, also under mixed precision).
Raw text: texts [B], or (texts_a, texts_b) for `segments=2`; targets: class ids (int) or scores (float).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_keras.tasks.base import TaskModel, dense_head, id_inputs


@keras.saving.register_keras_serializable(package="bert_keras")
class BertClassifier(TaskModel):
    def __init__(self, encoder, num_classes: int, dropout: float = 0.1, label_names=None, preprocessor=None,
                 segments: int = 1, name=None):
        """`label_names` (one string per class, or None for regression) and `segments` (1: text; 2: text pairs)
        travel in the config, so an export or a notebook holding only the `.keras` file can name its
        predictions and knows its inputs."""
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"{len(label_names)} label_names for {num_classes} classes: give one name per class")
        if segments not in (1, 2):
            raise ValueError(f"segments must be 1 (single texts) or 2 (text pairs), got {segments}")
        inputs = id_inputs()
        pooled = encoder(inputs, pooled_only=True)
        logits = dense_head(num_classes, encoder.config.initializer_range, "logits")(
            keras.layers.Dropout(dropout, name="head_dropout")(pooled))
        super().__init__(inputs, logits, encoder, preprocessor, name=name, num_classes=num_classes,
                         dropout=dropout, label_names=list(label_names) if label_names is not None else None,
                         segments=segments)

    @property
    def regression(self) -> bool:
        return self._task_args["num_classes"] == 1

    @property
    def segments(self) -> int:
        return self._task_args["segments"]

    @property
    def label_names(self) -> list[str]:
        return self._task_args["label_names"] or [str(i) for i in range(self._task_args["num_classes"])]

    def preprocess(self, x):
        return self.require_preprocessor()(tuple(x) if isinstance(x, (tuple, list)) else x)

    def serve(self, *texts) -> dict:
        """texts: [B] strings (one per segment) -> {"logits", "probabilities" [B, C], "label_id" [B] int64,
        "label" [B] string}, or for regression {"logits" [B, 1], "score" [B]}."""
        logits = tf.cast(self.inference(self.preprocess(texts[0] if len(texts) == 1 else tuple(texts))),
                         tf.float32)
        return self.decode(logits)

    def decode(self, logits) -> dict:
        if self.regression:
            return {"logits": logits, "score": logits[:, 0]}
        label_id = tf.argmax(logits, axis=-1)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits), "label_id": label_id,
                "label": tf.gather(tf.constant(self.label_names), label_id)}

    def classify(self, texts, texts_b=None) -> list[dict]:
        """For people: [{"label": name, "probability": p, "probabilities": {name: p}}] per text (regression:
        [{"score": s}]). `texts_b`: the second sentences of pairs."""
        out = self.serve_numpy(*([texts] if texts_b is None else [texts, texts_b]))
        if self.regression:
            return [{"score": float(s)} for s in out["score"]]
        return [{"label": label.decode(), "probability": float(p.max()),
                 "probabilities": dict(zip(self.label_names, map(float, p)))}
                for label, p in zip(out["label"], out["probabilities"])]
