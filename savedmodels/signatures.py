"""The serving signatures of each task kind: raw text in, answers out, all in-graph (TF core + TF.Text ops).

Each builder wraps the task model's own `serve` (the decoding its classify/answer/choose/entities methods use)
with the input checks a server needs, and returns a list of Signature(name, function, input specs, method name,
warmup inputs). Inputs are
[batch] string tensors (multiple choice: endings [batch, N]); `*_ids` signatures take the encoder's id dict for
callers that tokenize themselves. Bad input never crashes the graph: empty and whitespace texts get a defined
result ([CLS] [SEP] only), invalid UTF-8 reads as U+FFFD, a 1 MB text is truncated to the sequence length (a
SQuAD context and a text to tag are cut into doc-stride windows instead, so every piece of them is read), and
inputs whose batch sizes disagree fail with an InvalidArgument that names them.

An embedder (BertEmbedder) serves `serving_default` (text -> embedding, with its default prompt) and one signature
per prompt, named as the prompt (`query`, `passage`), that prepends it.
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


RESERVED = ("serving_default", "from_ids")


def embedding(model) -> list[Signature]:
    """The signatures of a BertEmbedder (a sentence-transformers model), each text [batch] -> embedding
    [batch, D] float32, as `model.encode(texts, prompt_name=...)` computes it:

    - serving_default: the model's default prompt (default_prompt_name's, or none) prepended, as `encode(texts)`;
    - one signature per prompt, named as the prompt (`query`, `passage`), that prepends that prompt (an empty
      prompt prepends nothing), as `encode(texts, prompt_name=name)`;
    - from_ids: the id dict (and, for a model with include_prompt=False, "prompt_length" [batch] int32: the
      prompt's tokens with [CLS], 0 for none) -> embedding.

    The texts are truncated to the model's max_seq_length (a sentence-transformers folder's, from
    sentence_bert_config.json), after the prompt is prepended, as sentence-transformers does.

    Args:
        model: BertEmbedder with its preprocessor.

    Returns:
        list of Signature.

    Raises:
        ValueError: a prompt named as another signature (serving_default, from_ids).

    Example:
        >>> [s.name for s in embedding(load_task_model("all-MiniLM-L6-v2"))]          # doctest: +SKIP
        ['serving_default', 'from_ids']
    """
    clash = [name for name in model.prompts if name in RESERVED]
    if clash:
        raise ValueError(f"the prompt {clash[0]!r} has the name of another signature ({', '.join(RESERVED)}): "
                         "rename it in config_sentence_transformers.json's prompts")
    ids = dict(IDS)
    if not model._task_args["include_prompt"]:
        ids["prompt_length"] = tf.TensorSpec([None], tf.int32, name="prompt_length")

    def from_ids(inputs):
        if "prompt_length" in inputs:
            inputs = {**inputs, "prompt_length": same_batch(inputs["input_word_ids"], inputs["prompt_length"],
                                                            names=["input_word_ids", "prompt_length"])[1]}
        return {"embedding": tf.cast(model.inference(inputs), tf.float32)}

    # Not converted by AutoGraph: the prompt's length is a Python int computed eagerly (BertEmbedder.prompt_length),
    # which AutoGraph's int() would turn into a tensor and its `if` into a tf.cond.
    plain = tf.autograph.experimental.do_not_convert
    warmup = {"text": WARMUP_TEXTS}
    signatures = [Signature("serving_default", plain(model.serve), [text("text")], warmup=warmup),
                  Signature("from_ids", plain(from_ids), [ids])]
    for name, prompt in model.prompts.items():
        signatures.append(Signature(name, plain(lambda t, prompt=prompt: model.serve(t, prompt=prompt)),
                                    [text("text")], warmup=warmup))
    return signatures
