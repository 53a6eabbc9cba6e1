"""BERT pretraining: masked-LM and next-sentence heads (google-research/bert run_pretraining.py).

MLM head: masked_lm.py's MaskedLMHead (the one fill-mask uses): gather the masked positions, dense + activation +
LayerNorm, then logits against the word-embedding matrix (tied) plus an output bias. NSP head: dense [H, 2] on
the pooled output.
Inputs: the id dict ([B, S]) plus `masked_lm_positions` [B, P] int32 (0-padded; padded slots carry weight 0).
Outputs: {"mlm_logits": [B, P, V], "nsp_logits": [B, 2]} float32.
Packed rows (pretraining/packed_records.py: up to K = 3 sequences a row) add `position_ids`, `packed_sequence_ids`
[B, S] and `cls_positions` [B, K]; then "nsp_logits" is [B, K, 2], each sequence's from its own [CLS], and the
loss weighs NSP by `next_sentence_weights` [B, K]: the same function of the same sequences as unpacked.
Checkpoint names: cls/predictions/transform/{dense,LayerNorm}/…, cls/predictions/output_bias,
cls/seq_relationship/output_weights ([2, H]) and output_bias.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from bert_keras.checkpoints.names import assign_named
from bert_keras.encoder import INPUT_NAMES, PACKED_INPUT_NAMES, is_packed
from bert_keras.tasks.base import TaskModel, dense_head, id_inputs
from bert_keras.tasks.masked_lm import MaskedLMHead


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPretrainer(TaskModel):
    """BERT pretraining: masked-LM and next-sentence heads on an encoder (google-research run_pretraining.py).

    `fit` on google-research's TFRecords (bert_keras.pretraining) minimises their loss: the weighted mean MLM
    cross-entropy over real predictions plus NSP cross-entropy (MLM alone when the labels have no
    "next_sentence_labels"). The heads keep google-research's names (`head_variables`), so
    `save_google_checkpoint(..., heads=model.head_weights())` writes a checkpoint run_pretraining.py resumes.

    Args:
        encoder: BertEncoder. The encoder to pretrain (its word table is tied to the MLM output).
        name: str or None. The Keras model name (keyword-only).

    Inputs and outputs:
        The id dict ([B, S] int32) plus "masked_lm_positions" [B, P] int32 (0-padded) ->
        {"mlm_logits": [B, P, V], "nsp_logits": [B, 2]} float32.
        Targets for `fit`: {"masked_lm_ids" [B, P], "masked_lm_weights" [B, P] (0 at padded slots),
        "next_sentence_labels" [B] (optional)}.
        Packed rows: the inputs also hold "position_ids", "packed_sequence_ids" [B, S] and "cls_positions" [B, K]
        (pretraining.dataset.model_batch names them) -> "nsp_logits" [B, K, 2]; targets "next_sentence_labels"
        and "next_sentence_weights" [B, K] (1 for the row's sequences, 0 for absent ones).

    Example:
        >>> model = bert_keras.tasks.BertPretrainer(bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")))
        >>> x = {"input_word_ids": np.full((2, 8), 5, "int32"), "input_mask": np.ones((2, 8), "int32"),
        ...      "input_type_ids": np.zeros((2, 8), "int32"), "masked_lm_positions": np.array([[1, 2]] * 2, "int32")}
        >>> out = model(x)
        >>> tuple(out["mlm_logits"].shape), tuple(out["nsp_logits"].shape)
        ((2, 2, 30522), (2, 2))
    """

    def __init__(self, encoder, *, name=None):
        inputs = id_inputs()
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        outputs = encoder({k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
        config = encoder.config
        mlm = MaskedLMHead(encoder.embeddings.word_embeddings, hidden_act=config.hidden_act,
                           initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
                           name="mlm_head")
        nsp = dense_head(2, config.initializer_range, "nsp_head")
        super().__init__(inputs, {"mlm_logits": mlm(outputs["sequence_output"], inputs["masked_lm_positions"]),
                                  "nsp_logits": nsp(outputs["pooled_output"])}, encoder, name=name)
        self.mlm_head, self.nsp_head = mlm, nsp
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        self.nsp_accuracy = keras.metrics.Mean(name="nsp_accuracy")
        self.sequences_per_row = keras.metrics.Mean(name="sequences_per_row")       # packed batches only
        self.real_tokens_per_row = keras.metrics.Mean(name="real_tokens_per_row")   # input_mask ones a row

    def call(self, inputs, training=None, mask=None):
        """Unpacked: the functional graph as built. Packed rows (encoder.is_packed): the same layers on the
        packed encoder, MLM over every slot and NSP on each sequence's pooled [CLS] -> nsp_logits [B, K, 2]."""
        if not is_packed(inputs):
            return super().call(inputs, training=training, mask=mask)
        out = self.encoder({k: inputs[k] for k in INPUT_NAMES + PACKED_INPUT_NAMES}, training=training)
        pooled = self.encoder.pool_at(out["sequence_output"], inputs["cls_positions"])                # [B, K, H]
        return {"mlm_logits": self.mlm_head(out["sequence_output"], inputs["masked_lm_positions"]),
                "nsp_logits": self.nsp_head(pooled)}

    def compute_output_spec(self, inputs, training=None, mask=None):
        if not is_packed(inputs):
            return super().compute_output_spec(inputs, training=training, mask=mask)
        b, p = inputs["masked_lm_positions"].shape
        return {"mlm_logits": keras.KerasTensor((b, p, self.encoder.config.vocab_size), "float32"),
                "nsp_logits": keras.KerasTensor((b, inputs["cls_positions"].shape[1], 2), "float32")}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`model.fit` on y = {masked_lm_ids [B, P], masked_lm_weights [B, P], next_sentence_labels [B] (absent
        for MLM-only)}: google-research's loss, scaled by 1/replicas as Keras scales compiled losses (gradients
        are summed across replicas)."""
        import tensorflow as tf
        nsp = "next_sentence_labels" in y
        loss = pretraining_loss(y_pred["mlm_logits"], y["masked_lm_ids"], y["masked_lm_weights"],
                                y_pred["nsp_logits"] if nsp else None, y.get("next_sentence_labels"),
                                y.get("next_sentence_weights"))
        return loss / tf.distribute.get_strategy().num_replicas_in_sync

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """MLM accuracy over real predictions (weight 1), NSP accuracy (MLM+NSP only) and, for packed rows, the
        sequences a row holds on average (its largest packed_sequence_id); and the real tokens a row holds on
        average (its input_mask ones: what real tokens per second counts, packed or not)."""
        hit = ops.equal(ops.cast(ops.argmax(y_pred["mlm_logits"], -1), "int32"),
                        ops.cast(y["masked_lm_ids"], "int32"))
        self.mlm_accuracy.update_state(ops.cast(hit, "float32"), sample_weight=y["masked_lm_weights"])
        if "next_sentence_labels" in y:
            nsp_hit = ops.equal(ops.cast(ops.argmax(ops.reshape(y_pred["nsp_logits"], (-1, 2)), -1), "int32"),
                                ops.cast(ops.reshape(y["next_sentence_labels"], (-1,)), "int32"))
            weights = y.get("next_sentence_weights")              # packed rows: their sequences only
            self.nsp_accuracy.update_state(ops.cast(nsp_hit, "float32"),
                                           sample_weight=None if weights is None else ops.reshape(weights, (-1,)))
        self.real_tokens_per_row.update_state(ops.sum(ops.cast(x["input_mask"], "float32"), axis=1))
        packed = is_packed(x)
        if packed:
            self.sequences_per_row.update_state(ops.cast(ops.max(x["packed_sequence_ids"], axis=1), "float32"))
        result = self.get_metrics_result()
        if "next_sentence_labels" not in y:              # MLM only: no NSP accuracy to report (not a 0)
            result.pop("nsp_accuracy", None)
        if not packed:
            result.pop("sequences_per_row", None)
        return result

    def head_variables(self) -> dict:
        """{google-research name: variable} of the two heads (the encoder's own are in checkpoints/names.py)."""
        return {**self.mlm_head.checkpoint_variables(),
                "cls/seq_relationship/output_weights": self.nsp_head.kernel,   # stored transposed: [2, H]
                "cls/seq_relationship/output_bias": self.nsp_head.bias}

    def assign_heads(self, heads: dict) -> None:
        """Loads `cls/...` weights as `read_checkpoint` returns them; a missing or mis-shaped one is named."""
        heads = dict(heads)
        if "cls/seq_relationship/output_weights" in heads:
            heads["cls/seq_relationship/output_weights"] = np.asarray(heads["cls/seq_relationship/output_weights"]).T
        assign_named(self.head_variables(), heads, "checkpoint's pretraining heads")

    def head_weights(self) -> dict:
        """The inverse of assign_heads, for save_google_checkpoint(..., heads=...)."""
        out = {name: np.asarray(v.numpy()) for name, v in self.head_variables().items()}
        out["cls/seq_relationship/output_weights"] = out["cls/seq_relationship/output_weights"].T
        return out


def pretraining_loss(mlm_logits, masked_lm_ids, masked_lm_weights, nsp_logits=None, next_sentence_labels=None,
                     next_sentence_weights=None):
    """google-research's loss: weighted mean MLM cross-entropy over real predictions (+ mean NSP cross-entropy).

    As run_pretraining.py: padded prediction slots carry weight 0, the sum is divided by the weights' sum
    (+ 1e-5), and the NSP term, when given, is added. Computed in float32 whatever the logits' dtype.
    Packed rows: the MLM term is the same weighted mean over all slots of all rows (the same predictions, so the
    same value), and NSP the mean over sequences, `next_sentence_weights` marking them, not over rows.

    Args:
        mlm_logits: [B, P, V] logits at the masked positions.
        masked_lm_ids: [B, P] int, the original ids there.
        masked_lm_weights: [B, P], 1 for a real prediction, 0 for padding.
        nsp_logits: [B, 2] or None (MLM only); packed rows: [B, K, 2].
        next_sentence_labels: [B] or [B, 1] int, 0 for "B follows A", 1 for a random B; packed rows: [B, K].
        next_sentence_weights: None, or packed rows' [B, K]: 1 for a sequence, 0 for an absent one.

    Returns:
        A float32 scalar.

    Example:
        >>> logits = np.zeros((1, 2, 4), "float32")                # uniform over 4 ids: ln 4 each
        >>> loss = bert_keras.tasks.pretraining_loss(logits, np.array([[1, 0]]), np.array([[1.0, 0.0]]))
        >>> round(float(loss), 4)
        1.3863
    """
    log_probs = ops.log_softmax(ops.cast(mlm_logits, "float32"), axis=-1)
    nll = -ops.take_along_axis(log_probs, ops.expand_dims(ops.cast(masked_lm_ids, "int32"), -1), axis=-1)[..., 0]
    weights = ops.cast(masked_lm_weights, "float32")
    loss = ops.sum(nll * weights) / (ops.sum(weights) + 1e-5)
    if nsp_logits is not None:
        nsp_log_probs = ops.log_softmax(ops.reshape(ops.cast(nsp_logits, "float32"), (-1, 2)), axis=-1)
        labels = ops.reshape(ops.cast(next_sentence_labels, "int32"), (-1, 1))      # [B], [B, 1], [B, K] -> [., 1]
        log_likelihood = ops.take_along_axis(nsp_log_probs, labels, axis=-1)[:, 0]
        if next_sentence_weights is None:
            loss = loss - ops.mean(log_likelihood)
        else:
            weights = ops.reshape(ops.cast(next_sentence_weights, "float32"), (-1,))
            loss = loss - ops.sum(log_likelihood * weights) / ops.maximum(ops.sum(weights), 1.0)
    return loss
