"""Sentence and sentence-pair classification (GLUE), multi-label classification (`multi_label`: every label
whose sigmoid is over 0.5), and regression (STS-B) with num_classes=1.

Head: dropout + dense on the pooled [CLS] vector, as google-research/bert's run_classifier.py.
Inputs: the encoder's id dict ([B, S] each). Output: logits [B, num_classes] (float32, also under mixed precision).
Raw text: texts [B], or (texts_a, texts_b) for `segments=2`; targets: class ids (int), multi-hot rows [B, C]
(multi-label: train with binary cross-entropy on the logits) or scores (float).
Packed rows (training only: `finetune --pack`, finetune/packed_examples.py): up to K examples a row, the id dict
plus `position_ids`, `packed_sequence_ids` [B, S] and `cls_positions` [B, K] -> logits [B, K, C], the same head on
each example's own pooled [CLS]; `fit` takes targets [B, K] with sample weights [B, K] (1 for an example, 0 for
an empty slot) and its loss is the mean over the examples, the unpacked loss of the same examples.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from bert_keras.encoder import INPUT_NAMES, PACKED_INPUT_NAMES, is_packed
from bert_keras.tasks.base import TaskModel, dense_head, id_inputs

SCORE_ACTIVATIONS = (None, "identity", "sigmoid")


@keras.saving.register_keras_serializable(package="bert_keras")
class BertClassifier(TaskModel):
    """Sentence or sentence-pair classification (GLUE), multi-label classification, or regression (STS-B) with
    `num_classes=1`.

    Dropout and one dense layer on the encoder's pooled [CLS] vector, as google-research/bert's
    run_classifier.py. The model maps the id dict to logits; with a preprocessor it also takes raw text in
    `fit`, `predict`, `evaluate` and `classify`, and one `.keras` file holds weights, vocabulary and labels.
    `label_names`, `segments` and `multi_label` travel in the config, so an export or a notebook holding only
    the `.keras` file can name its predictions and knows its inputs. A multi-label model (transformers'
    multi_label_classification) scores each class with a sigmoid and predicts every class over 0.5; train it
    with `keras.losses.BinaryCrossentropy(from_logits=True)` on multi-hot targets [B, C]. Arguments after
    `num_classes` are keyword-only.

    Args:
        encoder: BertEncoder. The backbone (its weights are fine-tuned with the head).
        num_classes: int. C, the number of classes; 1 for regression (a score).
        dropout: float. Dropout rate on the pooled vector before the head.
        label_names: list of C str, or None. Names for the classes (default "0", "1", ...).
        preprocessor: BertPreprocessor or None. Needed for raw text; without it the model takes ids only.
        segments: int. 1 for single texts, 2 for text pairs (what `serve`, `classify` and the export take).
        multi_label: bool. Independent classes: sigmoid probabilities, every class over 0.5 predicted.
        score_activation: str or None. Regression only: "sigmoid" turns the logit into the score (a
            sentence-transformers CrossEncoder's activation_fn); None or "identity" keeps the logit.
        name: str or None. The Keras model name.

    Inputs and outputs:
        The id dict, each [B, S] int32 -> logits [B, C] float32 (also under mixed precision).
        Raw text: texts [B], or (texts_a, texts_b) with `segments=2`; targets: class ids [B] (or scores, or
        multi-hot rows [B, C] for `multi_label`).

    Raises:
        ValueError: `label_names` does not have `num_classes` entries, `segments` is not 1 or 2, or
            `multi_label` with one class, or a `score_activation` other than sigmoid/identity, or one without
            regression.

    Example:
        >>> model = bert_keras.tasks.BertClassifier(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")), num_classes=2,
        ...     label_names=["negative", "positive"], preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> history = model.fit(["a fine film", "a dull film"], np.array([1, 0]), epochs=1, verbose=0)
        >>> result = model.classify(["what a film"])
        >>> result[0]["label"] in ("negative", "positive"), sorted(result[0]["probabilities"])
        (True, ['negative', 'positive'])
    """

    def __init__(self, encoder, num_classes: int, *, dropout: float = 0.1, label_names=None, preprocessor=None,
                 segments: int = 1, multi_label: bool = False, score_activation: str | None = None, name=None):
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"{len(label_names)} label_names for {num_classes} classes: give one name per class")
        if multi_label and num_classes < 2:
            raise ValueError("multi_label needs two classes or more (one output is regression)")
        if score_activation not in SCORE_ACTIVATIONS:
            raise ValueError(f"score_activation {score_activation!r} is none of sigmoid, identity")
        if score_activation is not None and num_classes != 1:
            raise ValueError("score_activation is for one-output (regression) models")
        if segments not in (1, 2):
            raise ValueError(f"segments must be 1 (single texts) or 2 (text pairs), got {segments}")
        inputs = id_inputs()
        pooled = encoder(inputs, pooled_only=True)
        logits = dense_head(num_classes, encoder.config.initializer_range, "logits")(
            keras.layers.Dropout(dropout, name="head_dropout")(pooled))
        super().__init__(inputs, logits, encoder, preprocessor, name=name, num_classes=num_classes,
                         dropout=dropout, label_names=list(label_names) if label_names is not None else None,
                         segments=segments, multi_label=bool(multi_label), score_activation=score_activation)

    def call(self, inputs, training=None, mask=None):
        """Unpacked: the functional graph as built. Packed rows (encoder.is_packed, with "cls_positions" [B, K]):
        the encoder on the packed row, then the same dropout and dense head on each example's pooled [CLS]
        (encoder.pool_at) -> logits [B, K, C]."""
        if not is_packed(inputs):
            return super().call(inputs, training=training, mask=mask)
        out = self.encoder({k: inputs[k] for k in INPUT_NAMES + PACKED_INPUT_NAMES}, training=training)
        pooled = self.encoder.pool_at(out["sequence_output"], inputs["cls_positions"])                # [B, K, H]
        return self.get_layer("logits")(self.get_layer("head_dropout")(pooled, training=training))

    def compute_output_spec(self, inputs, training=None, mask=None):
        if not is_packed(inputs):
            return super().compute_output_spec(inputs, training=training, mask=mask)
        b, k = inputs["cls_positions"].shape
        return keras.KerasTensor((b, k, self._task_args["num_classes"]), "float32")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Packed rows: the compiled loss of each example [B, K], averaged over the examples (`sample_weight`
        [B, K]: 1 for an example, 0 for an empty slot), so the same value as the unpacked batch of the same
        examples; scaled by 1/replicas as Keras scales compiled losses. Unpacked: Keras' compiled loss."""
        if not is_packed(x):
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        return packed_loss(self.loss, y, y_pred, sample_weight) / tf.distribute.get_strategy().num_replicas_in_sync

    @property
    def multi_label(self) -> bool:
        """True when each class is predicted on its own (sigmoid over 0.5), not one class of all (softmax)."""
        return self._task_args.get("multi_label", False)

    @property
    def regression(self) -> bool:
        """True for a one-output model (num_classes=1): `classify` gives scores, not labels."""
        return self._task_args["num_classes"] == 1

    @property
    def segments(self) -> int:
        """1 when the model classifies single texts, 2 for text pairs."""
        return self._task_args["segments"]

    @property
    def label_names(self) -> list[str]:
        """One name per class, in logit order ("0", "1", ... when none were given)."""
        return self._task_args["label_names"] or [str(i) for i in range(self._task_args["num_classes"])]

    def preprocess(self, x):
        """texts [B], or a (texts_a, texts_b) tuple or list -> the id dict [B, S]."""
        return self.require_preprocessor()(tuple(x) if isinstance(x, (tuple, list)) else x)

    def serve(self, *texts) -> dict:
        """texts: [B] strings (one per segment) -> {"logits", "probabilities" [B, C], "label_id" [B] int64,
        "label" [B] string}; multi-label {"logits", "probabilities" (sigmoid) [B, C], "selected" [B, C] bool
        (probability over 0.5), "labels" [B, C] string (the class's name where selected, else "")}; for regression
        {"logits" [B, 1], "score" [B]}."""
        logits = tf.cast(self.inference(self.preprocess(texts[0] if len(texts) == 1 else tuple(texts))),
                         tf.float32)
        return self.decode(logits)

    def decode(self, logits) -> dict:
        """logits [B, C] float32 -> what `serve` returns (see there)."""
        if self.regression:
            score = logits[:, 0]
            return {"logits": logits,
                    "score": tf.sigmoid(score) if self._task_args.get("score_activation") == "sigmoid" else score}
        if self.multi_label:
            probabilities = tf.sigmoid(logits)
            selected = probabilities > 0.5
            names = tf.broadcast_to(tf.constant(self.label_names), tf.shape(logits))
            return {"logits": logits, "probabilities": probabilities, "selected": selected,
                    "labels": tf.where(selected, names, "")}
        label_id = tf.argmax(logits, axis=-1)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits), "label_id": label_id,
                "label": tf.gather(tf.constant(self.label_names), label_id)}

    def classify(self, texts, texts_b=None) -> list[dict]:
        """Classifies raw texts, for people: runs `serve` (the export's decoding) and converts to Python.

        Args:
            texts: list of str (or a [B] array). The texts, or the first sentences of pairs; one str is one
                example (a list of one result).
            texts_b: list of str or None. The second sentences, for a `segments=2` model.

        Returns:
            One dict per text: {"label": name, "probability": p, "probabilities": {name: p}}; multi-label
            {"labels": [every name over 0.5, in class order], "probabilities": {name: p}}; {"score": s} for
            regression.

        Example:
            >>> model.classify(["what a film"])[0]["label"] in model.label_names      # doctest: +SKIP
            True
        """
        results = []
        for out in self.serve_batches(*([texts] if texts_b is None else [texts, texts_b])):
            if self.regression:
                results += [{"score": float(s)} for s in out["score"]]
                continue
            if self.multi_label:
                results += [{"labels": [n for n, chosen in zip(self.label_names, row) if chosen],
                             "probabilities": dict(zip(self.label_names, map(float, p)))}
                            for row, p in zip(out["selected"], out["probabilities"])]
                continue
            results += [{"label": label.decode(), "probability": float(p.max()),
                         "probabilities": dict(zip(self.label_names, map(float, p)))}
                        for label, p in zip(out["label"], out["probabilities"])]
        return results


def packed_loss(loss, targets, logits, weights):
    """A Keras loss averaged over the examples of packed rows: sum(loss per example * weight) / sum(weights).

    Args:
        loss: a keras.losses.Loss (what the classifier is compiled with: cross-entropy, mean squared error).
        targets: [B, K] class ids or scores ([B, K, C] multi-hot rows for multi-label).
        logits: [B, K, C] the packed classifier's output.
        weights: [B, K]: 1 for an example, 0 for an empty slot.

    Returns:
        A float32 scalar: the unpacked loss (the mean over examples) of the same examples.

    Example:
        >>> loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        >>> round(float(packed_loss(loss, np.array([[1, 0]]), np.zeros((1, 2, 2), "float32"),
        ...                         np.array([[1.0, 0.0]]))), 4)                     # ln 2, one example
        0.6931
    """
    logits = ops.cast(logits, "float32")
    targets = ops.convert_to_tensor(targets)
    if len(targets.shape) == 2 and logits.shape[-1] == 1:           # regression: one score per example
        targets = ops.expand_dims(targets, -1)
    per_example = ops.cast(loss.call(targets, logits), "float32")                                     # [B, K]
    weights = ops.cast(weights, "float32")
    return ops.sum(per_example * weights) / ops.maximum(ops.sum(weights), 1.0)
