"""BertConfig: the hyper-parameters of a BERT encoder, and the presets.

The field names are google-research/bert's `bert_config.json` keys, so a config
reads and writes that file unchanged and every released checkpoint's config
loads as it is. Hugging Face's `config.json` uses the same keys for these fields
(plus extras, which `from_dict` ignores).
"""

from __future__ import annotations

import dataclasses
import json

_ACTIVATIONS = ("gelu", "gelu_new", "relu", "tanh")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be a multiple of "
                f"num_attention_heads ({self.num_attention_heads}).")
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(f"BertConfig.hidden_act {self.hidden_act!r} is not one of {_ACTIVATIONS}.")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "BertConfig":
        """Builds a config from bert_config.json (or HF config.json) keys; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in names}
        missing = {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                   "vocab_size"} - set(kwargs)
        if missing:
            raise ValueError(f"BERT config is missing {sorted(missing)}; a bert_config.json names "
                             "vocab_size, hidden_size, num_hidden_layers, num_attention_heads "
                             "and intermediate_size.")
        return cls(**kwargs)

    @classmethod
    def from_json_file(cls, path: str) -> "BertConfig":
        with open(path, encoding="utf-8") as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path} is not valid JSON: {e}") from None
        return cls.from_dict(values)

    def to_json_file(self, path: str) -> None:
        """Writes bert_config.json atomically (temporary file, then rename)."""
        from bert_keras.atomic import atomic_file
        with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=True)
            f.write("\n")

    def num_parameters(self, with_pooler: bool = True) -> int:
        """Parameter count of the encoder, computed from the shapes (checked against built models in tests)."""
        h, i, n = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
        pooler = h * h + h if with_pooler else 0
        return embeddings + n * layer + pooler


def _preset(layers: int, hidden: int, heads: int) -> BertConfig:
    return BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      intermediate_size=4 * hidden)


# The sizes of google-research/bert's releases (the small BERTs use the same L/H/A naming).
PRESETS = {
    "bert_tiny": _preset(2, 128, 2),
    "bert_mini": _preset(4, 256, 4),
    "bert_small": _preset(4, 512, 8),
    "bert_medium": _preset(8, 512, 8),
    "bert_base": _preset(12, 768, 12),
    "bert_large": _preset(24, 1024, 16),
}


def preset_config(name: str) -> BertConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.") from None
