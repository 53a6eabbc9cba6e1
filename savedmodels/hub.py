"""TF Hub-style BERT SavedModels: a preprocessor and an encoder with the interface of TF Hub's
`bert_en_uncased_preprocess` and `bert_en_uncased_L-12_H-768_A-12` (the Reusable SavedModel API), for code
written against those (`hub.KerasLayer`, `tf.saved_model.load`).

<out>/preprocessor/  (TF Hub's preprocessor API, as bert_en_uncased_preprocess/3 implements it)
  __call__(text [B] string) -> {input_word_ids, input_mask, input_type_ids} int32 [B, seq_length]
  tokenize(text [B] string) -> RaggedTensor int32 [B, (words), (pieces)]: BERT's words, each word's wordpieces
  tokenize.get_special_tokens_dict() -> {vocab_size, padding_id, start_of_sequence_id, end_of_segment_id, mask_id}
  bert_pack_inputs([a], [a, b] or [a, b, c], seq_length=<export's>) -> the id dict [B, seq_length], for any
      seq_length; each segment RaggedTensor int32 [B, (tokens)] or [B, (words), (pieces)]
  signature serving_default: text -> the id dict
<out>/encoder/
  __call__(id dict [B, S] int32, training=False) -> {pooled_output [B, H], sequence_output [B, S, H],
                                                     encoder_outputs: per layer [B, S, H], default = pooled}
  variables, trainable_variables, regularization_losses (empty): what hub.KerasLayer reads to fine-tune
  signature serving_default: id dict -> pooled_output, sequence_output
Both folders are written by saving.save_servable (temporary name, op check, rename), which saves the functions and
the tf.Variables they read, never the Keras objects, so both also load on TF Serving's session path.
"""

from __future__ import annotations

import itertools
import os

import tensorflow as tf

from bert_keras.encoder import INPUT_NAMES
from bert_keras.preprocessing.packer import pack_segments
from savedmodels.saving import save_servable

# bert_pack_inputs takes up to this many segments (TF Hub's bert_en_uncased_preprocess/3: 2).
MAX_SEGMENTS = 3


def _tokens(preprocessor, text):
    """text [B] -> RaggedTensor [B, (pieces)], with B in the row splits' static shape (TF's shape inference then
    sees a known batch size through the saved functions, as with TF Hub's)."""
    ids = preprocessor.tokenize(text)
    return tf.RaggedTensor.from_row_splits(ids.flat_values, tf.reshape(ids.row_splits, tf.shape(text) + 1),
                                           validate=False)


def _preprocessor_module(preprocessor, seq_length: int):
    """(attributes, signatures) of the preprocessor SavedModel, TF Hub's preprocessor API:

    tokenize(text [B]) -> int32 RaggedTensor [B, (words), (pieces)]
    tokenize.get_special_tokens_dict() -> {vocab_size, padding_id, start_of_sequence_id, end_of_segment_id,
                                          mask_id}: scalar int32 tensors
    bert_pack_inputs(segments, seq_length=<export's>): 1 to 3 segments, each int32 RaggedTensor [B, (tokens)] or
        [B, (words), (pieces)]; seq_length any int, a scalar argument of the traced functions, as in the
        Model Garden's export (official/nlp/tools/export_tfhub_lib.py, BertPackInputsSavedModelWrapper), so one
        SavedModel packs to any length (TF Hub's takes 1 or 2 segments, all of one rank)
    __call__(text [B]) and signature serving_default: the id dict at the export's seq_length
    """
    text_spec = tf.TensorSpec([None], tf.string, name="text")

    def pack(tokenized_inputs, seq_length=seq_length):
        return pack_segments(list(tokenized_inputs), preprocessor.cls_id, preprocessor.sep_id, seq_length,
                             preprocessor.max_seq_length, preprocessor.truncation, preprocessor.pad_id)

    # Traced with seq_length a scalar tensor: a call with any int (or none: the default, converted) matches.
    bert_pack_inputs = tf.function(pack, autograph=False)
    length = tf.TensorSpec([], tf.int32, name="seq_length")
    for k in range(1, MAX_SEGMENTS + 1):
        for ranks in itertools.product((1, 2), repeat=k):       # every mix of [B, (tokens)], [B, (words), (pieces)]
            segments = [tf.RaggedTensorSpec([None] * (r + 1), tf.int32, ragged_rank=r) for r in ranks]
            bert_pack_inputs.get_concrete_function(segments, seq_length=length)

    tokenize = tf.__internal__.tracking.AutoTrackable()
    tokenize.__call__ = tf.function(lambda text: preprocessor.words(_tokens(preprocessor, text)),
                                    input_signature=[text_spec], autograph=False)
    vocab = preprocessor.vocab
    special = {"vocab_size": len(vocab), "padding_id": preprocessor.pad_id,
               "start_of_sequence_id": preprocessor.cls_id, "end_of_segment_id": preprocessor.sep_id}
    if "[MASK]" in vocab:
        special["mask_id"] = vocab.index("[MASK]")
    tokenize.get_special_tokens_dict = tf.__internal__.tracking.AutoTrackable()
    tokenize.get_special_tokens_dict.__call__ = tf.function(
        lambda: {k: tf.constant(v, tf.int32) for k, v in special.items()}, input_signature=[])

    call = tf.function(lambda text: pack([_tokens(preprocessor, text)]), input_signature=[text_spec],
                       autograph=False)
    attributes = {"tokenize": tokenize, "bert_pack_inputs": bert_pack_inputs, "__call__": call}
    return attributes, {"serving_default": call.get_concrete_function()}


def _encoder_module(encoder):
    """(attributes, signatures) of the encoder SavedModel; the variable lists hold the tf.Variables."""
    spec = {n: tf.TensorSpec([None, None], tf.int32, name=n) for n in INPUT_NAMES}

    def call(inputs, training=False):
        out = encoder(inputs, training=training)
        return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"],
                "encoder_outputs": list(out["encoder_outputs"]), "default": out["pooled_output"]}

    function = tf.function(call)
    for training in (False, True):
        function.get_concrete_function(spec, training=training)
    serve = tf.function(lambda inputs: {k: v for k, v in call(inputs).items()
                                         if k in ("pooled_output", "sequence_output")}, input_signature=[spec])
    attributes = {"__call__": function, "variables": list(encoder.variables),
                  "trainable_variables": list(encoder.trainable_variables), "regularization_losses": []}
    return attributes, {"serving_default": serve.get_concrete_function()}


def export_hub_style(encoder, preprocessor, out: str, seq_length: int = 128) -> dict:
    """Writes <out>/preprocessor and <out>/encoder; returns their paths. Refuses to overwrite."""
    paths = {"preprocessor": os.path.join(out, "preprocessor"), "encoder": os.path.join(out, "encoder")}
    existing = [p for p in paths.values() if os.path.exists(p)]
    if existing:
        raise FileExistsError(f"{', '.join(existing)} exists: choose another output folder")
    os.makedirs(out, exist_ok=True)
    for name, make in (("preprocessor", lambda: _preprocessor_module(preprocessor, seq_length)),
                       ("encoder", lambda: _encoder_module(encoder))):
        attributes, signatures = make()
        save_servable(paths[name], signatures, attributes)
    return paths
