"""SQuAD span extraction: a dense layer scores every token as answer start and end (google-research run_squad.py).

Inputs: the id dict ([B, S]). Outputs: {"start_logits": [B, S], "end_logits": [B, S]} float32, -10000 at padding.

Padding is masked out of the softmax over positions (google-research leaves it in, but always pads to 384):
with per-batch padding its logits would make the loss and the n-best depend on the other windows in the batch.
"""

from __future__ import annotations

import keras

from bert_keras.layers import padding_bias
from bert_keras.tasks.base import TaskModel, dense_head, id_inputs


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSpanLabeler(TaskModel):
    def __init__(self, encoder, name=None):
        inputs = id_inputs()
        logits = dense_head(2, encoder.config.initializer_range, "span_logits")(encoder(inputs)["sequence_output"])
        padding = padding_bias(inputs["input_mask"])                                              # [B, S]
        outputs = {"start_logits": logits[:, :, 0] + padding, "end_logits": logits[:, :, 1] + padding}
        super().__init__(inputs, outputs, encoder, name=name)
