"""SQuAD span extraction: a dense layer scores every token as answer start and end (google-research run_squad.py).

Inputs: the id dict ([B, S]). Outputs: {"start_logits": [B, S], "end_logits": [B, S]} float32.
"""

from __future__ import annotations

import keras

from bert_keras.tasks.base import TaskModel, dense_head, id_inputs


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSpanLabeler(TaskModel):
    def __init__(self, encoder, name=None):
        inputs = id_inputs()
        logits = dense_head(2, encoder.config.initializer_range, "span_logits")(encoder(inputs)["sequence_output"])
        outputs = {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}
        super().__init__(inputs, outputs, encoder, name=name)

