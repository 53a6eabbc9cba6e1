"""sentence-transformers folders -> BertEmbedder or BertReranker, with no torch.

A SentenceTransformer folder lists its modules in `modules.json`; both layouts are read:
  up to 5.x   sentence_transformers.models.Transformer, .Pooling, .Dense, .Normalize
  6.x         sentence_transformers.base.modules.transformer.Transformer,
              sentence_transformers.sentence_transformer.modules.pooling.Pooling,
              sentence_transformers.base.modules.dense.Dense, sentence_transformers.base.modules.normalize.Normalize
The Transformer module is a Hugging Face BERT folder (config.json, model.safetensors, vocab.txt or
tokenizer.json) with `sentence_bert_config.json` (max_seq_length and do_lower_case up to 5.x; 6.x keeps the length
as tokenizer_config.json's model_max_length); Pooling's config.json holds the
mode(s) (`pooling_mode`, or 5.x's `pooling_mode_*_token(s)` booleans) and `include_prompt`; each Dense its
`in_features`, `out_features`, `bias`, `activation_function` and model.safetensors (`linear.weight` [out, in],
`linear.bias`). `config_sentence_transformers.json` gives `prompts`, `default_prompt_name` and
`similarity_fn_name`. A module this reader cannot reproduce exactly is refused by name. This module reads the
files (`read_sentence_transformer`); tasks/sentence_transformers.py builds the task model from what it read.

A CrossEncoder folder (sentence-transformers 4 and later) is a one-label BertForSequenceClassification whose
`config_sentence_transformers.json` says `"model_type": "CrossEncoder"` (its activation under `activation_fn`,
or in config.json's `sentence_transformers.activation_fn`; before 4.0 `sbert_ce_default_activation_function`).
"""

from __future__ import annotations

import dataclasses
import json
import os

# The last part of each module's class path, in either layout.
TRANSFORMER, POOLING, DENSE, NORMALIZE = "Transformer", "Pooling", "Dense", "Normalize"
LEGACY_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
TORCH_ACTIVATIONS = {"Tanh": "tanh", "Identity": "identity", "ReLU": "relu", "GELU": "gelu", "Sigmoid": "sigmoid"}


def _json(path: str, required: bool = True) -> dict:
    if not os.path.exists(path):
        if required:
            raise FileNotFoundError(f"{path} not found: a sentence-transformers folder needs it (save the model "
                                    "again with SentenceTransformer.save)")
        return {}
    with open(path, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(value, (dict, list)):
        raise ValueError(f"{path} holds a JSON {type(value).__name__}: not a sentence-transformers file")
    return value


def is_sentence_transformers_folder(path: str) -> bool:
    """A folder sentence-transformers saved: `modules.json` (a SentenceTransformer), or a CrossEncoder's
    `config_sentence_transformers.json`."""
    return os.path.isdir(path) and (os.path.exists(os.path.join(path, "modules.json")) or is_cross_encoder(path))


def is_cross_encoder(path: str) -> bool:
    """Does `config_sentence_transformers.json` say model_type CrossEncoder?"""
    config = os.path.join(path, "config_sentence_transformers.json")
    return os.path.exists(config) and _json(config).get("model_type") == "CrossEncoder"


def _kind(module: dict, modules_json: str) -> str:
    path = str(module.get("type", ""))
    kind = path.rsplit(".", 1)[-1]
    if not path.startswith("sentence_transformers.") or kind not in (TRANSFORMER, POOLING, DENSE, NORMALIZE):
        raise ValueError(f"{modules_json}: the module {path!r} is not one bert-keras reproduces (Transformer, "
                         "Pooling, Dense, Normalize): it cannot be converted exactly")
    return kind


def _pooling(folder: str) -> tuple[list[str], bool]:
    config = _json(os.path.join(folder, "config.json"))
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        modes = [mode] if isinstance(mode, str) else list(mode)
    else:
        modes = [m for key, m in LEGACY_MODES.items() if config.get(key)] or ["mean"]
    if "lasttoken" in modes:
        raise ValueError(f"{folder}: pooling mode lasttoken is a decoder model's; a BERT folder pools cls, mean, "
                         "max, mean_sqrt_len_tokens or weightedmean")
    return modes, bool(config.get("include_prompt", True))


def _dense(folder: str) -> tuple[dict, object, object]:
    """({"units", "activation", "use_bias"}, kernel [in, out], bias [out] or None) of a Dense module folder."""
    from bert_keras.checkpoints.huggingface import read_safetensors
    config = _json(os.path.join(folder, "config.json"))
    for key, default in (("module_input_name", "sentence_embedding"), ("module_output_name", None),
                         ("use_residual", False)):
        if config.get(key, default) not in (default, "sentence_embedding"):
            raise ValueError(f"{folder}/config.json: Dense with {key}={config[key]!r} is not reproduced here")
    activation = str(config.get("activation_function", "torch.nn.modules.activation.Tanh")).rsplit(".", 1)[-1]
    if activation not in TORCH_ACTIVATIONS:
        raise ValueError(f"{folder}/config.json: Dense activation {activation} is none of "
                         f"{', '.join(TORCH_ACTIVATIONS)}")
    path = os.path.join(folder, "model.safetensors")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found (a pytorch_model.bin needs torch to read: load and save the model "
                                "with sentence-transformers 3 or later, which writes model.safetensors)")
    tensors = read_safetensors(path)
    if "linear.weight" not in tensors:
        raise ValueError(f"{path} has no linear.weight: not a sentence-transformers Dense module")
    kernel = tensors["linear.weight"].T
    use_bias = bool(config.get("bias", True))
    if kernel.shape != (config.get("in_features", kernel.shape[0]), config.get("out_features", kernel.shape[1])):
        raise ValueError(f"{path}: linear.weight is {tensors['linear.weight'].shape}, config.json says "
                         f"{config.get('out_features')} x {config.get('in_features')}")
    return ({"units": int(kernel.shape[1]), "activation": TORCH_ACTIVATIONS[activation], "use_bias": use_bias},
            kernel, tensors.get("linear.bias") if use_bias else None)


def _activation(folder: str) -> str:
    """A CrossEncoder's activation: "sigmoid" or "identity" (sigmoid when the folder names none, one label)."""
    st = _json(os.path.join(folder, "config_sentence_transformers.json"))
    hf = _json(os.path.join(folder, "config.json"))
    path = (st.get("activation_fn") or (hf.get("sentence_transformers") or {}).get("activation_fn")
            or hf.get("sbert_ce_default_activation_function") or "torch.nn.modules.activation.Sigmoid")
    name = str(path).rsplit(".", 1)[-1]
    if name not in ("Sigmoid", "Identity"):
        raise ValueError(f"{folder}: the CrossEncoder activation {path} is not reproduced here (Sigmoid, "
                         "Identity)")
    return name.lower()


def max_length(folder: str, st_config: dict) -> int | None:
    """The Transformer module's max_seq_length, as sentence-transformers reads it: sentence_bert_config.json's
    `max_seq_length` (up to 5.x, and CrossEncoders' `max_length`), else tokenizer_config.json's
    `model_max_length` (what 6.x saves) when it is a real bound (transformers writes 1e30 for none and the
    model's positions bound it), else None (the model's positions, at most 512)."""
    for key in ("max_seq_length", "max_length"):
        if st_config.get(key):
            return int(st_config[key])
    tokenizer = _json(os.path.join(folder, "tokenizer_config.json"), required=False)
    value = tokenizer.get("model_max_length")
    positions = _json(os.path.join(folder, "config.json"), required=False).get("max_position_embeddings", 512)
    if isinstance(value, (int, float)) and 0 < value <= positions:
        return int(value)
    return None


@dataclasses.dataclass
class SentenceTransformerFolder:
    """What a sentence-transformers folder holds, read without building a model (tasks/sentence_transformers.py
    builds it).

    Attributes:
        kind: "SentenceTransformer" or "CrossEncoder".
        transformer: str. The folder of the BERT weights and tokenizer (the Transformer module's).
        max_seq_length: int or None. The module's length (None: the model's positions, at most 512).
        lower_case: bool or None. sentence_bert_config.json's do_lower_case when true, else None (the tokenizer's).
        pooling: list of str. include_prompt: bool. dense: list of ({"units", "activation", "use_bias"},
            kernel [in, out], bias [out] or None). normalize: bool. prompts: dict. default_prompt_name: str or
            None. similarity_fn_name: str. activation: str (a CrossEncoder's: "sigmoid" or "identity").
    """
    kind: str
    transformer: str
    max_seq_length: int | None = None
    lower_case: bool | None = None
    pooling: list = dataclasses.field(default_factory=lambda: ["mean"])
    include_prompt: bool = True
    dense: list = dataclasses.field(default_factory=list)
    normalize: bool = False
    prompts: dict = dataclasses.field(default_factory=dict)
    default_prompt_name: str | None = None
    similarity_fn_name: str = "cosine"
    activation: str = "sigmoid"


def read_sentence_transformer(folder: str) -> SentenceTransformerFolder:
    """Reads a SentenceTransformer or CrossEncoder folder's modules and settings (see the module docstring).

    Args:
        folder: str. What `SentenceTransformer.save` or `CrossEncoder.save` wrote (either module layout).

    Returns:
        SentenceTransformerFolder.

    Raises:
        ValueError: a module, pooling mode or activation that cannot be reproduced (named), or inconsistent files.
        FileNotFoundError: a file the folder's modules.json names is missing.

    Example:
        >>> spec = read_sentence_transformer(bert_keras.loading.bundled_minilm_folder())
        >>> spec.kind, spec.pooling, spec.normalize, spec.max_seq_length
        ('SentenceTransformer', ['mean'], True, 256)
    """
    if is_cross_encoder(folder):
        config = _json(os.path.join(folder, "config.json"))
        if "BertForSequenceClassification" not in (config.get("architectures") or []):
            raise ValueError(f"{folder}: a CrossEncoder here is a BertForSequenceClassification; config.json names "
                             f"{config.get('architectures')}")
        length = max_length(folder, _json(os.path.join(folder, "sentence_bert_config.json"), required=False))
        return SentenceTransformerFolder("CrossEncoder", folder, length, activation=_activation(folder))
    modules_json = os.path.join(folder, "modules.json")
    modules = _json(modules_json)
    if not isinstance(modules, list) or not modules:
        raise ValueError(f"{modules_json} lists no modules")
    modules = sorted(modules, key=lambda m: int(m.get("idx", 0)))
    kinds = [_kind(m, modules_json) for m in modules]
    if kinds[0] != TRANSFORMER or kinds.count(TRANSFORMER) != 1 or POOLING not in kinds:
        raise ValueError(f"{modules_json}: expected a Transformer, a Pooling, then Dense and Normalize modules; "
                         f"found {', '.join(kinds)}")
    if kinds.index(POOLING) != 1 or (NORMALIZE in kinds and kinds.index(NORMALIZE) != len(kinds) - 1):
        raise ValueError(f"{modules_json}: the modules {', '.join(kinds)} are not in the order Transformer, "
                         "Pooling, Dense..., Normalize")
    transformer = os.path.join(folder, modules[0].get("path", ""))
    st_config = _json(os.path.join(transformer, "sentence_bert_config.json"), required=False)
    pooling, include_prompt = _pooling(os.path.join(folder, modules[1]["path"]))
    settings = _json(os.path.join(folder, "config_sentence_transformers.json"), required=False)
    return SentenceTransformerFolder(
        "SentenceTransformer", transformer, max_length(transformer, st_config),
        lower_case=True if st_config.get("do_lower_case") else None, pooling=pooling, include_prompt=include_prompt,
        dense=[_dense(os.path.join(folder, m["path"])) for m, k in zip(modules, kinds) if k == DENSE],
        normalize=NORMALIZE in kinds, prompts={str(k): str(v) for k, v in (settings.get("prompts") or {}).items()},
        default_prompt_name=settings.get("default_prompt_name") or None,
        similarity_fn_name=settings.get("similarity_fn_name") or "cosine")
