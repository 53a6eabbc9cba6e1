"""Multiple choice (SWAG, OpenBookQA, ARC): every (context, ending) pair is encoded on its own, one shared scorer
turns each pair's pooled [CLS] vector into a score, and a softmax runs over the choices (the SWAG recipe of the
BERT paper).

Inputs: the id dict, each [B, C, S] (C choices). Output: logits [B, C] float32.
Raw text: (contexts [B], endings [B, C]); targets: the right ending's index [B]. `choose()` names the ending.
"""

from __future__ import annotations

import keras
import tensorflow as tf
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
    """Multiple choice (SWAG, ARC, OpenBookQA): picks the ending that best continues a context.

    Every (context, ending) pair is encoded on its own, one shared scorer turns each pair's pooled [CLS] vector
    into a score and a softmax runs over the choices (the BERT paper's SWAG recipe), so the number of choices
    may differ between data sets. Arguments after `encoder` are keyword-only.

    Args:
        encoder: BertEncoder. The backbone.
        dropout: float. Dropout rate on the pooled vectors before the scorer.
        preprocessor: BertPreprocessor or None. Needed for raw text.
        name: str or None. The Keras model name.

    Inputs and outputs:
        The id dict, each [B, C, S] int32 (C choices) -> logits [B, C] float32.
        Raw text: (contexts [B], endings [B, C]); targets: the right ending's index [B].

    Example:
        >>> model = bert_keras.tasks.BertMultipleChoice(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")),
        ...     preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> choice = model.choose(["She opened the door"], [["and walked in.", "the sky.", "of cheese."]])
        >>> sorted(choice[0]), choice[0]["choice"] in (0, 1, 2)
        (['choice', 'ending', 'probability'], True)
    """

    def __init__(self, encoder, *, dropout: float = 0.1, preprocessor=None, name=None):
        inputs = id_inputs(rank=3)
        pooled = encoder(FoldChoices(name="fold_choices")(inputs), pooled_only=True)
        scores = dense_head(1, encoder.config.initializer_range, "choice_score")(
            keras.layers.Dropout(dropout, name="head_dropout")(pooled))
        logits = UnfoldChoices(name="unfold_choices")(scores, inputs["input_word_ids"])
        super().__init__(inputs, logits, encoder, preprocessor, name=name, dropout=dropout)

    def preprocess(self, x):
        """(contexts [B], endings [B, C]) -> ids [B, C, S]: each context paired with each of its endings."""
        contexts, endings = x
        contexts = tf.tile(contexts[:, None], [1, tf.shape(endings)[1]])
        return self.require_preprocessor()((contexts, endings))

    def serve(self, context, endings) -> dict:
        """-> {"logits", "probabilities" [B, C], "prediction" [B] int64, "ending" [B] the chosen ending}."""
        logits = tf.cast(self.inference(self.preprocess((context, endings))), tf.float32)
        prediction = tf.argmax(logits, -1)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits), "prediction": prediction,
                "ending": tf.gather(endings, prediction, batch_dims=1)}

    def choose(self, contexts, endings) -> list[dict]:
        """Picks an ending for each raw context, for people: `serve` (the export's decoding) in Python.

        Args:
            contexts: list of str, [B]; one str (with its list of endings) is one example.
            endings: list of B lists of C str: each context's candidate endings.

        Returns:
            One dict per context: {"choice": index, "ending": text, "probability": p}.

        Example:
            >>> model.choose(["She opened the door"], [["and walked in.", "of cheese."]])   # doctest: +SKIP
            [{'choice': 0, 'ending': 'and walked in.', 'probability': 0.93}]
        """
        return [{"choice": int(i), "ending": e.decode(), "probability": float(p[i])}
                for out in self.serve_batches(contexts, endings)
                for i, e, p in zip(out["prediction"], out["ending"], out["probabilities"])]

