"""Token tagging (CoNLL-2003 NER): dropout + dense on every token's vector; labels go on each word's first
WordPiece and the other pieces are ignored in loss and evaluation.

Inputs: the id dict ([B, S]). Output: logits [B, S, num_labels] float32.
"""

from __future__ import annotations

import keras

from bert_keras.tasks.base import TaskModel, dense_head, id_inputs


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTagger(TaskModel):
    def __init__(self, encoder, num_labels: int, dropout: float = 0.1, name=None):
        inputs = id_inputs()
        sequence = keras.layers.Dropout(dropout, name="head_dropout")(encoder(inputs)["sequence_output"])
        logits = dense_head(num_labels, encoder.config.initializer_range, "logits")(sequence)
        super().__init__(inputs, logits, encoder, name=name, num_labels=num_labels, dropout=dropout)

