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


@dataclasses.dataclass(frozen=True, kw_only=True)
class BertConfig:
    """The hyper-parameters of a BERT encoder: what `bert_config.json` holds.

    Frozen and keyword-only, so two sizes (or two dropout rates) cannot be swapped silently and a config can key a
    cache. The defaults are BERT-Base's; the field names are google-research/bert's, so every released
    checkpoint's `bert_config.json` (and Hugging Face's `config.json`) reads with `from_json_file` unchanged.

    Args:
        vocab_size: int. Rows of the word-embedding table: the vocabulary's size (30522 for the English vocab).
        hidden_size: int. H, the width of every token vector, the embeddings and the pooled output.
        num_hidden_layers: int. L, the number of transformer blocks.
        num_attention_heads: int. A, heads per block; `hidden_size` must be a multiple of it (head size H / A).
        intermediate_size: int. I, the feed-forward width of each block (4 H in every released BERT).
        hidden_act: str. The feed-forward activation: "gelu" (exact erf, what the checkpoints were trained
            with), "gelu_new" (tanh approximation), "relu" or "tanh".
        hidden_dropout_prob: float. Dropout on the embeddings and on every block's two residual branches.
        attention_probs_dropout_prob: float. Dropout on the attention probabilities.
        max_position_embeddings: int. Rows of the position table: the longest sequence the encoder accepts.
        type_vocab_size: int. Segment ids the model knows (2: sentence A and B).
        initializer_range: float. Standard deviation of the truncated-normal initial weights.
        layer_norm_eps: float. LayerNorm epsilon (1e-12, as the original; not Keras' 1e-3).

    Raises:
        ValueError: a size is not a positive integer, `hidden_size` is not a multiple of
            `num_attention_heads`, or `hidden_act` is unknown.

    Example:
        >>> config = bert_keras.BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2,
        ...                                num_attention_heads=2, intermediate_size=512)
        >>> config == bert_keras.preset_config("bert_tiny")
        True
        >>> config.head_size, config.num_parameters()
        (64, 4385920)
    """

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
        """D = hidden_size / num_attention_heads, the width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict:
        """The fields as a dict with `bert_config.json`'s keys (what `from_dict` and `BertEncoder.get_config` take)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "BertConfig":
        """Builds a config from bert_config.json (or HF config.json) keys; unknown keys are ignored.

        Raises:
            ValueError: one of vocab_size, hidden_size, num_hidden_layers, num_attention_heads or
                intermediate_size is missing (they have no safe default), or a value is invalid.
        """
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
        """Reads a `bert_config.json` (google-research) or `config.json` (Hugging Face); extra keys are ignored.

        Raises:
            ValueError: the file is not JSON, or lacks one of the five size keys (`from_dict`).
        """
        with open(path, encoding="utf-8") as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path} holds a JSON {type(values).__name__}, not a config object: give the "
                             "checkpoint's own bert_config.json or config.json")
        check_bert_architecture(values, path)
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


class Presets(dict):
    """{name: BertConfig}: the sizes of google-research/bert's releases, random weights (no download).

    bert_tiny L=2 H=128 A=2, bert_mini L=4 H=256 A=4, bert_small L=4 H=512 A=8, bert_medium L=8 H=512 A=8,
    bert_base L=12 H=768 A=12, bert_large L=24 H=1024 A=16; intermediate size 4 H, vocabulary 30522. The names
    are what `bert-keras pretrain --model` and `loading.load_backbone` accept; for released weights by name use
    `from_preset` (the zoo).

    Example:
        >>> sorted(bert_keras.PRESETS)[:3]
        ['bert_base', 'bert_large', 'bert_medium']
        >>> bert_keras.PRESETS["bert_tiny"].hidden_size
        128
    """


PRESETS = Presets({
    "bert_tiny": _preset(2, 128, 2),
    "bert_mini": _preset(4, 256, 4),
    "bert_small": _preset(4, 512, 8),
    "bert_medium": _preset(8, 512, 8),
    "bert_base": _preset(12, 768, 12),
    "bert_large": _preset(24, 1024, 16),
})


def preset_config(name: str) -> BertConfig:
    """The BertConfig of a preset size (see `PRESETS`), with a clear error for an unknown name.

    Args:
        name: str. A key of `PRESETS`, e.g. "bert_tiny" or "bert_base".

    Returns:
        The frozen BertConfig.

    Raises:
        ValueError: `name` is not a preset (the message lists them).

    Example:
        >>> config = bert_keras.preset_config("bert_base")
        >>> config.num_hidden_layers, config.hidden_size, config.num_attention_heads
        (12, 768, 12)
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.") from None


def check_bert_architecture(values: dict, path: str) -> None:
    """Refuses a Hugging Face `config.json` of another architecture than BERT's.

    RoBERTa, ELECTRA, DistilBERT or GPT-2 folders carry the same size keys (`hidden_size`, `num_hidden_layers`,
    ...), so without this check their weights or sizes would load into a BERT encoder (RoBERTa's positions are
    offset by two, GPT-2 is causal) and train or serve with no error, silently wrong. A `bert_config.json` has
    neither key and passes.

    Args:
        values: dict. The parsed config.json.
        path: str. Its path, for the message.

    Raises:
        ValueError: `model_type` is present and not "bert", or an entry of `architectures` is not a `Bert...`
            class (BertModel, BertForMaskedLM, BertForSequenceClassification, ...).

    Example:
        >>> check_bert_architecture({"model_type": "bert", "architectures": ["BertModel"]}, "config.json")
        >>> check_bert_architecture({"model_type": "roberta"}, "m/config.json")
        Traceback (most recent call last):
        ...
        ValueError: m/config.json is a roberta model (model_type 'roberta'), not BERT: bert-keras loads BERT models only (model_type 'bert', Bert... architectures); give a BERT checkpoint
    """
    model_type = values.get("model_type")
    architectures = values.get("architectures") or []
    if not isinstance(architectures, list):
        architectures = [architectures]
    other = [a for a in architectures if not (isinstance(a, str) and a.startswith("Bert"))]
    if model_type is None and not other:
        return
    if model_type is not None and str(model_type).lower() == "bert" and not other:
        return
    what = f"model_type {model_type!r}" if model_type is not None else "no model_type"
    if other:
        what += f", architectures {', '.join(map(str, other))}"
    kind = model_type if model_type is not None and str(model_type).lower() != "bert" else (other or ["?"])[0]
    raise ValueError(f"{path} is a {kind} model ({what}), not BERT: bert-keras loads BERT models only "
                     "(model_type 'bert', Bert... architectures); give a BERT checkpoint")
