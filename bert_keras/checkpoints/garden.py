"""TF Model Garden (tf-models-official) TF2 checkpoints of `official.nlp.modeling.networks.BertEncoder`.

These are object-based: `tf.train.Checkpoint(encoder=bert_encoder)` writes names such as
`encoder/layer_with_weights-4/_attention_layer/_query_dense/kernel/.ATTRIBUTES/VARIABLE_VALUE`, numbered in the
order the encoder creates its weighted layers:
  0 word embeddings, 1 position embeddings, 2 type embeddings, 3 embedding LayerNorm,
  4 … 4+L-1 transformer layers, 4+L pooler.
Attention kernels are EinsumDense [H, N, D] (query/key/value) and [N, D, H] (output); they reshape to [H, H].

A fine-tuned `official.nlp.modeling.models.BertClassifier` (the Model Garden's sentence-prediction task saves
`tf.train.Checkpoint(model=classifier, optimizer=...)`) nests the encoder as its first weighted layer,
`model/layer_with_weights-0/layer_with_weights-N/...`, and its ClassificationHead as the second: with the default
use_encoder_pooler=True only `model/layer_with_weights-1/out_proj/{kernel [H, C], bias [C]}`, on the encoder's
pooled vector after dropout, as our BertClassifier. It is read as google-research run_classifier.py names it:
`output_weights` [C, H] and `output_bias` [C]. Optimizer slots (`.OPTIMIZER_SLOT`) are skipped.
"""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_NAME = re.compile(r"^(?P<root>[^/]+)/layer_with_weights-(?P<k>\d+)/(?P<rest>.+)" + re.escape(_SUFFIX) + "$")
_NESTED = re.compile(r"^(?P<root>[^/]+)/layer_with_weights-0/(?=layer_with_weights-\d+/)")   # a classifier's encoder
_HEAD = re.compile(r"^[^/]+/layer_with_weights-1/(?P<rest>.+)" + re.escape(_SUFFIX) + "$")   # and its head
_LAYER = {  # Model Garden TransformerEncoderBlock attribute -> google-research name inside layer_{i}
    "_attention_layer/_query_dense": "attention/self/query",
    "_attention_layer/_key_dense": "attention/self/key",
    "_attention_layer/_value_dense": "attention/self/value",
    "_attention_layer/_output_dense": "attention/output/dense",
    "_attention_layer_norm": "attention/output/LayerNorm",
    "_intermediate_dense": "intermediate/dense",
    "_output_dense": "output/dense",
    "_output_layer_norm": "output/LayerNorm",
}


def is_garden_checkpoint(names) -> bool:
    """Do these checkpoint variable names look like a Model Garden BertEncoder's (`.../layer_with_weights-N/...`)?"""
    return any(_NAME.match(n) for n in names)


def is_garden_classifier(names) -> bool:
    """Do these names look like a fine-tuned Model Garden BertClassifier's (the encoder nested in the model)?"""
    return any(_NESTED.match(n) for n in names)


def read_garden_checkpoint(prefix: str) -> dict:
    """{google name: array} from a Model Garden BertEncoder checkpoint, or from a fine-tuned Model Garden
    BertClassifier's (its head as run_classifier.py's `output_weights` [C, H] and `output_bias` [C])."""
    reader = tf.train.load_checkpoint(prefix)
    names = [n for n in reader.get_variable_to_shape_map() if "/.OPTIMIZER_SLOT/" not in n]
    classifier = is_garden_classifier(names)
    by_layer: dict[int, dict[str, np.ndarray]] = {}
    head = {}
    for name in names:
        if classifier:
            h = _HEAD.match(name)
            if h:
                head[h["rest"]] = reader.get_tensor(name)
                continue
            if not _NESTED.match(name):
                continue                                  # the optimizer's iterations, the step counter
        m = _NAME.match(_NESTED.sub(r"\g<root>/", name) if classifier else name)
        if m:
            by_layer.setdefault(int(m["k"]), {})[m["rest"]] = reader.get_tensor(name)
    if not by_layer:
        raise ValueError(f"{prefix} has no Model Garden BertEncoder weights (names like "
                         "'encoder/layer_with_weights-0/embeddings/.ATTRIBUTES/VARIABLE_VALUE').")
    num_layers = sum(1 for w in by_layer.values() if any(k.startswith("_attention_layer/") for k in w))
    if sorted(by_layer) != list(range(num_layers + 5)):
        raise ValueError(f"{prefix}: expected weighted layers 0..{num_layers + 4} (embeddings, LayerNorm, "
                         f"{num_layers} transformer layers, pooler), found {sorted(by_layer)}; only the "
                         "standard BertEncoder layout (no embedding projection) is supported.")
    if classifier and sorted(head) != ["out_proj/bias", "out_proj/kernel"]:
        raise ValueError(f"{prefix}: a Model Garden BertClassifier whose head holds {sorted(head)}; only the default "
                         "head (use_encoder_pooler=True: out_proj/kernel and out_proj/bias on the pooled vector) "
                         "reads as a BertClassifier")
    hidden = by_layer[0]["embeddings"].shape[1]
    out = {
        "bert/embeddings/word_embeddings": by_layer[0]["embeddings"],
        "bert/embeddings/position_embeddings": by_layer[1]["embeddings"],
        "bert/embeddings/token_type_embeddings": by_layer[2]["embeddings"],
        "bert/embeddings/LayerNorm/gamma": by_layer[3]["gamma"],
        "bert/embeddings/LayerNorm/beta": by_layer[3]["beta"],
        "bert/pooler/dense/kernel": by_layer[4 + num_layers]["kernel"],
        "bert/pooler/dense/bias": by_layer[4 + num_layers]["bias"],
    }
    for i in range(num_layers):
        weights = by_layer[4 + i]
        for rest, value in weights.items():
            attribute, _, leaf = rest.rpartition("/")
            if attribute not in _LAYER:
                raise ValueError(f"{prefix}: unknown weight {rest!r} in transformer layer {i}.")
            target = f"bert/encoder/layer_{i}/{_LAYER[attribute]}/{leaf}"
            if leaf == "kernel" and value.ndim == 3:
                value = value.reshape(hidden, -1) if value.shape[0] == hidden else value.reshape(-1, hidden)
            elif leaf == "bias" and value.ndim == 2:
                value = value.reshape(-1)
            out[target] = value
    if classifier:
        out["output_weights"], out["output_bias"] = head["out_proj/kernel"].T, head["out_proj/bias"]
    return out


def garden_bert_encoder(config, dropout: float = 0.0):
    """The Model Garden's own `BertEncoder` for a BertConfig (needs tf-models-official, the [garden] extra): the
    network TF Hub's BERT SavedModels were exported from, used as a peer in tests and benchmarks. Read weights
    into it with `tf.train.Checkpoint(encoder=...)` from a checkpoint converted by the Model Garden's converter."""
    import tf_keras
    from official.modeling import tf_utils
    from official.nlp.modeling import networks
    return networks.BertEncoder(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        activation=tf_utils.get_activation(config.hidden_act), max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, dropout_rate=dropout, attention_dropout_rate=dropout,
        initializer=tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range), dict_outputs=True)
