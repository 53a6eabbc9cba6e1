"""Multiple choice (SWAG, OpenBookQA, ARC): every (context, ending) pair is encoded on its own, one shared scorer
turns each pair's pooled [CLS] vector into a score, and a softmax runs over the choices (the SWAG recipe of the
BERT paper).

Inputs: the id dict, each [B, C, S] (C choices). Output: logits [B, C] float32.
"""

from __future__ import annotations

import keras
from keras import ops

from bert_keras.tasks.base import TaskModel, dense_head, id_inputs


@keras.saving.register_keras_serializable(package="bert_keras")
class FoldChoices(keras.layers.Layer):
    """{name: [B, C, S]} -> {name: [B*C, S]}: each choice becomes its own sequence for the encoder."""

    def call(self, inputs):
        return {k: ops.reshape(v, (-1, ops.shape(v)[-1])) for k, v in inputs.items()}


@keras.saving.register_keras_serializable(package="bert_keras")
class UnfoldChoices(keras.layers.Layer):
    """scores [B*C, 1] and the [B, C, S] ids -> [B, C]."""

    def call(self, scores, ids):
        return ops.reshape(scores, (ops.shape(ids)[0], ops.shape(ids)[1]))


@keras.saving.register_keras_serializable(package="bert_keras")
class BertMultipleChoice(TaskModel):
    def __init__(self, encoder, dropout: float = 0.1, name=None):
        inputs = id_inputs(rank=3)
        pooled = encoder(FoldChoices(name="fold_choices")(inputs), pooled_only=True)
        scores = dense_head(1, encoder.config.initializer_range, "choice_score")(
            keras.layers.Dropout(dropout, name="head_dropout")(pooled))
        logits = UnfoldChoices(name="unfold_choices")(scores, inputs["input_word_ids"])
        super().__init__(inputs, logits, encoder, name=name, dropout=dropout)

