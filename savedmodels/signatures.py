"""The serving signatures of each task kind: raw text in, answers out, all in-graph (TF core + TF.Text ops).

Each builder wraps the task model's own `serve` (the decoding its classify/answer/choose/entities methods use)
with the input checks a server needs, and returns a list of Signature(name, function, input specs, method name,
warmup inputs). Inputs are
[batch] string tensors (multiple choice: endings [batch, N]); `*_ids` signatures take the encoder's id dict for
callers that tokenize themselves. Bad input never crashes the graph: empty and whitespace texts get a defined
result ([CLS] [SEP] only), invalid UTF-8 reads as U+FFFD, a 1 MB text is truncated to the sequence length (a
SQuAD context and a text to tag are cut into doc-stride windows instead, so every piece of them is read), and
inputs whose batch sizes disagree fail with an InvalidArgument that names them.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

from bert_keras.encoder import INPUT_NAMES

PREDICT = "tensorflow/serving/predict"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"

def text(name):
    return tf.TensorSpec([None], tf.string, name=name)


IDS = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}
WARMUP_TEXTS = ["a charming and often affecting journey .", "", "Ünïcödé text, “quoted”."]


@dataclasses.dataclass
class Signature:
    name: str
    function: Callable
    specs: list
    method: str = PREDICT
    warmup: dict | None = None       # {input name: value} for the warmup request


def same_batch(*tensors, names):
    """InvalidArgument naming the inputs when their batch sizes differ."""
    first = tf.shape(tensors[0])[0]
    checks = [tf.debugging.assert_equal(tf.shape(t)[0], first, message=f"{names[0]} and {name} must have the same "
                                        "batch size") for t, name in zip(tensors[1:], names[1:])]
    with tf.control_dependencies(checks):
        return [tf.identity(t) for t in tensors]


def classification(model) -> list[Signature]:
    keys = ["text"] if model.segments == 1 else ["text_a", "text_b"]
    names = tf.constant(model.label_names)

    def serve(*texts):
        return model.serve(*(same_batch(*texts, names=keys) if len(texts) > 1 else texts))

    def from_examples(serialized):
        features = tf.io.parse_example(serialized, {key: tf.io.FixedLenFeature([], tf.string) for key in keys})
        return model.serve(*(features[k] for k in keys))

    signatures = [
        Signature("serving_default", serve, [text(k) for k in keys], warmup={k: WARMUP_TEXTS for k in keys}),
        Signature("from_ids", lambda ids: model.decode(tf.cast(model.inference(ids), tf.float32)), [IDS]),
    ]
    if model.regression:
        signatures.append(Signature("regress", lambda inputs: {"outputs": from_examples(inputs)["score"]},
                                    [text("inputs")], REGRESS))
    else:
        def classify(inputs):
            probabilities = from_examples(inputs)["probabilities"]
            return {"classes": tf.tile(names[None], [tf.shape(probabilities)[0], 1]), "scores": probabilities}
        signatures.append(Signature("classify", classify, [text("inputs")], CLASSIFY))
    return signatures


def span(model) -> list[Signature]:
    def answer(question, context):
        return model.serve(*same_batch(question, context, names=["question", "context"]))

    return [Signature("serving_default", answer, [text("question"), text("context")], warmup={
        "question": ["Who wrote it?", ""], "context": ["It was written by Ann Smith in 1990.", ""]})]


def multiple_choice(model) -> list[Signature]:
    def choose(context, endings):
        context, endings = same_batch(context, endings, names=["context", "endings"])
        check = tf.debugging.assert_positive(tf.shape(endings)[1], message="endings must hold at least one "
                                             "ending per context ([batch, N] with N >= 1)")
        with tf.control_dependencies([check]):
            endings = tf.identity(endings)
        return model.serve(context, endings)

    return [Signature("serving_default", choose,
                      [text("context"), tf.TensorSpec([None, None], tf.string, name="endings")],
                      warmup={"context": ["A man sits at a piano."],
                              "endings": [["He plays a song.", "He eats the piano."]]})]


def tagging(model) -> list[Signature]:
    """serving_default: text [batch] -> BertTagger.serve's per-piece labels and entities; a text longer than the
    sequence length is windowed in-graph (SQuAD's doc stride and max-context rule), every piece labelled once."""
    return [Signature("serving_default", model.serve, [text("text")],
                      warmup={"text": ["Angela Merkel visited Paris ."]})]


def masked_lm(model) -> list[Signature]:
    """serving_default: text [batch] (each literal "[MASK]" is a blank) -> the model's top_k tokens per blank:
    token_ids, tokens, probabilities [batch, masks, top_k] and mask_count [batch]."""
    return [Signature("serving_default", model.serve, [text("text")],
                      warmup={"text": ["The capital of France is [MASK].", "", "[MASK] [MASK]"]})]
