"""TF Hub-style BERT SavedModels: a preprocessor and an encoder with the interface of TF Hub's
`bert_en_uncased_preprocess` and `bert_en_uncased_L-12_H-768_A-12` (the Reusable SavedModel API), for code
written against those (`hub.KerasLayer`, `tf.saved_model.load`).

<out>/preprocessor/
  __call__(text [B] string) -> {input_word_ids, input_mask, input_type_ids} int32 [B, seq_length]
  tokenize(text [B] string) -> RaggedTensor int32 [B, (tokens)]   (TF Hub's is [B, (words), (pieces)]; code
                                                                    that passes it on to bert_pack_inputs works as is)
  bert_pack_inputs([a] or [a, b] RaggedTensors [B, (tokens)], seq_length=<export's>) -> the id dict
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

import os

import tensorflow as tf

from bert_keras.encoder import INPUT_NAMES
from bert_keras.preprocessing.packer import pack_segments
from savedmodels.saving import save_servable


def _preprocessor_module(preprocessor, seq_length: int):
    """(attributes, signatures) of the preprocessor SavedModel."""
    text_spec = tf.TensorSpec([None], tf.string, name="text")

    def pack(tokenized_inputs, seq_length=seq_length):
        return pack_segments(list(tokenized_inputs), preprocessor.cls_id, preprocessor.sep_id, seq_length,
                             max(seq_length, preprocessor.max_seq_length), preprocessor.truncation,
                             preprocessor.pad_id)

    bert_pack_inputs = tf.function(pack)
    ragged = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
    for k in (1, 2):
        bert_pack_inputs.get_concrete_function([ragged] * k)
        bert_pack_inputs.get_concrete_function([ragged] * k, seq_length=seq_length)
    call = tf.function(lambda text: pack([preprocessor.tokenize(text)]), input_signature=[text_spec])
    attributes = {"tokenize": tf.function(preprocessor.tokenize, input_signature=[text_spec]),
                  "bert_pack_inputs": bert_pack_inputs, "__call__": call}
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
