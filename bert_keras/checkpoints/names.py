"""The one name scheme every checkpoint format is translated to: google-research/bert's TF1 variable names.

Each reader (google.py, garden.py, huggingface.py) turns its file into {google name: numpy array}; this file
maps those names onto a BertEncoder's variables, checks that nothing is missing, extra or mis-shaped, and
assigns. Kernels are [in, out] as in TF; `cls/...` names are the pretraining heads (MLM and NSP), and
`output_weights` [C, H] / `output_bias` [C] run_classifier.py's fine-tuned classifier head (also what a Model
Garden BertClassifier's head reads as): the encoder holds neither, so they are returned apart.
"""

from __future__ import annotations

import numpy as np

HEAD_PREFIX = "cls/"
POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")   # a BertForMaskedLM saves none
MLM_HEAD_NAMES = (
    "cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias",
)
HEAD_NAMES = MLM_HEAD_NAMES + ("cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias")
CLASSIFIER_NAMES = ("output_weights", "output_bias")     # run_classifier.py's head: [C, H] and [C]


def _dense(prefix, layer):
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def _norm(prefix, layer):
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def encoder_variables(encoder) -> dict:
    """{google name: keras Variable} for every weight of a BertEncoder (pooler included)."""
    emb = encoder.embeddings
    names = {
        "bert/embeddings/word_embeddings": emb.word_embeddings.embeddings,
        "bert/embeddings/position_embeddings": emb.position_embeddings.embeddings,
        "bert/embeddings/token_type_embeddings": emb.token_type_embeddings.embeddings,
        **_norm("bert/embeddings/LayerNorm", emb.layer_norm),
        **_dense("bert/pooler/dense", encoder.pooler),
    }
    for i, block in enumerate(encoder.transformer_layers):
        p = f"bert/encoder/layer_{i}"
        names.update({
            **_dense(f"{p}/attention/self/query", block.query),
            **_dense(f"{p}/attention/self/key", block.key),
            **_dense(f"{p}/attention/self/value", block.value),
            **_dense(f"{p}/attention/output/dense", block.attention_output),
            **_norm(f"{p}/attention/output/LayerNorm", block.attention_norm),
            **_dense(f"{p}/intermediate/dense", block.intermediate),
            **_dense(f"{p}/output/dense", block.output_dense),
            **_norm(f"{p}/output/LayerNorm", block.output_norm),
        })
    return names


def split_heads(tensors: dict) -> tuple[dict, dict]:
    """Splits {name: array} into (encoder weights, head weights: the pretraining heads and a classifier's)."""
    is_head = lambda k: k.startswith(HEAD_PREFIX) or k in CLASSIFIER_NAMES  # noqa: E731
    return {k: v for k, v in tensors.items() if not is_head(k)}, {k: v for k, v in tensors.items() if is_head(k)}


def assign_encoder_weights(encoder, tensors: dict, source: str = "checkpoint", optional=()) -> None:
    """Assigns {google name: array} to the encoder; nothing is half-assigned. A mismatch is one ValueError line:
    the first one (a shape, else a missing, else an extra weight), how many more, and the fix. Names in
    `optional` may be missing (those variables keep their initial values)."""
    variables = encoder_variables(encoder)
    missing = sorted(set(variables) - set(tensors) - set(optional))
    extra = sorted(set(tensors) - set(variables))
    shapes = [(name, tuple(np.shape(tensors[name])), tuple(variables[name].shape))
              for name in sorted(set(variables) & set(tensors))
              if tuple(variables[name].shape) != tuple(np.shape(tensors[name]))]
    problems = [f"shape of {name}: the {source} has {got}, the config needs {want}" for name, got, want in shapes]
    problems += [f"missing from the {source}: {name}" for name in missing]
    problems += [f"not in a BertEncoder of this config: {name}" for name in extra]
    if problems:                        # one line: the first mismatch (a shape says most), how many, the fix
        more = f" (and {len(problems) - 1} more mismatches)" if len(problems) > 1 else ""
        raise ValueError(f"Checkpoint does not fit the config: {problems[0]}{more}; check that bert_config.json "
                         "(or config.json) belongs to these weights (layers, hidden size, vocab size, max positions)")
    for name, variable in variables.items():
        if name in tensors:
            variable.assign(np.asarray(tensors[name], dtype=variable.dtype))


def encoder_weights(encoder) -> dict:
    """{google name: numpy array} of an encoder's weights: the inverse of assign_encoder_weights."""
    return {name: np.asarray(v.numpy()) for name, v in encoder_variables(encoder).items()}


def assign_named(variables: dict, tensors: dict, what: str) -> None:
    """Assigns {name: array} to {name: variable}; a missing or mis-shaped weight is named, nothing half-assigned."""
    problems = [f"{name} is missing" for name in variables if name not in tensors]
    problems += [f"shape of {name}: {np.shape(tensors[name])} in the {what}, {tuple(v.shape)} in the model"
                 for name, v in variables.items() if name in tensors and np.shape(tensors[name]) != tuple(v.shape)]
    if problems:
        raise ValueError(f"the {what} does not fit: " + "; ".join(problems))
    for name, variable in variables.items():
        variable.assign(np.asarray(tensors[name], dtype=variable.dtype))
