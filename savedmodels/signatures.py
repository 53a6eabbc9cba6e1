"""The serving signatures of each task kind: raw text in, answers out, all in-graph (TF core + TF.Text ops).

Each builder returns a list of Signature(name, function, input specs, method name, warmup inputs). Inputs are
[batch] string tensors (multiple choice: endings [batch, N]); `*_ids` signatures take the encoder's id dict for
callers that tokenize themselves. Bad input never crashes the graph: empty and whitespace texts get a defined
result ([CLS] [SEP] only), invalid UTF-8 reads as U+FFFD, a 1 MB text is truncated to the sequence length, and
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


def char_offsets(texts, byte_offsets):
    """Byte offsets into each text [B, T] -> character offsets (UTF-8 code points), -1 stays -1."""
    b = tf.shape(byte_offsets)[0]
    rows = tf.repeat(texts, tf.shape(byte_offsets)[1])
    flat = tf.reshape(byte_offsets, [-1])
    chars = tf.strings.length(tf.strings.substr(rows, tf.zeros_like(flat), tf.maximum(flat, 0)), unit="UTF8_CHAR")
    return tf.reshape(tf.where(flat >= 0, tf.cast(chars, tf.int64), -1), [b, -1])


def classification(model, preprocessor, segments: int = 1) -> list[Signature]:
    config = model.get_config()
    regression = config["num_classes"] == 1
    names = tf.constant(config.get("label_names") or [str(i) for i in range(config["num_classes"])])
    keys = ["text"] if segments == 1 else ["text_a", "text_b"]

    def scores(texts):
        texts = same_batch(*texts, names=keys) if len(texts) > 1 else texts
        logits = model(preprocessor(texts[0] if len(texts) == 1 else tuple(texts)), training=False)
        return tf.cast(logits, tf.float32)

    def outputs(logits):
        if regression:
            return {"logits": logits, "score": logits[:, 0]}
        label_id = tf.argmax(logits, axis=-1)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits), "label_id": label_id,
                "label": tf.gather(names, label_id)}

    def from_examples(serialized):
        spec = {key: tf.io.FixedLenFeature([], tf.string) for key in keys}
        features = tf.io.parse_example(serialized, spec)
        return scores([features[k] for k in keys])

    warm = {k: WARMUP_TEXTS for k in keys}
    signatures = [
        Signature("serving_default", lambda *t: outputs(scores(list(t))), [text(k) for k in keys], warmup=warm),
        Signature("from_ids", lambda ids: outputs(tf.cast(model(ids, training=False), tf.float32)), [IDS]),
    ]
    if regression:
        signatures.append(Signature("regress", lambda inputs: {"outputs": from_examples(inputs)[:, 0]}, [text("inputs")],
                                    REGRESS))
    else:
        def classify(inputs):
            probabilities = tf.nn.softmax(from_examples(inputs))
            return {"classes": tf.tile(names[None], [tf.shape(probabilities)[0], 1]), "scores": probabilities}
        signatures.append(Signature("classify", classify, [text("inputs")], CLASSIFY))
    return signatures


def span(model, preprocessor, **answer_args) -> list[Signature]:
    from bert_keras.finetune.squad import SquadAnswerer
    answerer = SquadAnswerer(model, preprocessor, **answer_args)

    def answer(question, context):
        question, context = same_batch(question, context, names=["question", "context"])
        out = answerer(question, context)
        offsets = char_offsets(context, tf.stack([out["start"], out["end"]], 1))
        return {"answer": out["answer"], "start": offsets[:, 0], "end": offsets[:, 1], "score": out["score"],
                "null_score": out["null_score"], "start_logits": tf.cast(out["start_logits"], tf.float32),
                "end_logits": tf.cast(out["end_logits"], tf.float32), "window_example": out["example_index"]}

    s = Signature("serving_default", answer, [text("question"), text("context")], warmup={
        "question": ["Who wrote it?", ""], "context": ["It was written by Ann Smith in 1990.", ""]})
    return [s]


def multiple_choice(model, preprocessor) -> list[Signature]:
    def choose(context, endings):
        context, endings = same_batch(context, endings, names=["context", "endings"])
        check = tf.debugging.assert_positive(tf.shape(endings)[1], message="endings must hold at least one "
                                             "ending per context ([batch, N] with N >= 1)")
        with tf.control_dependencies([check]):
            contexts = tf.tile(context[:, None], [1, tf.shape(endings)[1]])
        logits = tf.cast(model(preprocessor((contexts, endings)), training=False), tf.float32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits), "prediction": tf.argmax(logits, -1)}

    s = Signature("serving_default", choose, [text("context"), tf.TensorSpec([None, None], tf.string, name="endings")], warmup={
        "context": ["A man sits at a piano."], "endings": [["He plays a song.", "He eats the piano."]]})
    return [s]


def tagging(model, preprocessor, labels) -> list[Signature]:
    vocab = tf.constant(preprocessor.vocab)
    names = tf.constant(list(labels))

    def tag(texts):
        ids, starts, ends = preprocessor.tokenize_with_offsets(texts)
        x = preprocessor.pack([ids])
        budget = tf.shape(x["input_word_ids"])[1] - 2
        ids, starts, ends = ids[:, :budget], starts[:, :budget], ends[:, :budget]
        best = tf.argmax(model(x, training=False), axis=-1)[:, 1:]                  # drop [CLS]
        dense = lambda r, fill: r.to_tensor(fill)                                   # noqa: E731
        n = tf.shape(dense(ids, 0))[1]
        mask = tf.sequence_mask(ids.row_lengths(), n)
        return {"tokens": tf.where(mask, tf.gather(vocab, dense(ids, 0)), ""),
                "labels": tf.where(mask, tf.gather(names, best[:, :n]), ""),
                "start": char_offsets(texts, dense(starts, -1)), "end": char_offsets(texts, dense(ends, -1)),
                "token_mask": tf.cast(mask, tf.int32)}

    s = Signature("serving_default", tag, [text("text")], warmup={"text": ["Angela Merkel visited Paris ."]})
    return [s]
