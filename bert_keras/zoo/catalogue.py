"""The catalogue of google-research/bert's released checkpoints (data in catalogue.json, not code branches)."""

from __future__ import annotations

import dataclasses
import json
import os

from bert_keras.config import BertConfig

_CATALOGUE = os.path.join(os.path.dirname(__file__), "catalogue.json")


@dataclasses.dataclass(frozen=True)
class CatalogueEntry:
    """One released checkpoint of catalogue.json: where to download it, its checksum, its sizes and casing."""

    name: str
    url: str
    archive: str           # the archive's file name
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab_size: int
    cased: bool | None     # None: the vocab has no casing to check (Chinese characters)
    lower_case: bool       # what the preprocessor must do for this vocab
    params: int            # with pooler
    released: str
    sha256: str | None = None
    size: int | None = None
    note: str = ""

    def config(self) -> BertConfig:
        """The BertConfig its bert_config.json must hold (checked after download)."""
        return BertConfig(vocab_size=self.vocab_size, hidden_size=self.hidden, num_hidden_layers=self.layers,
                          num_attention_heads=self.heads, intermediate_size=self.intermediate)


def load_catalogue(path: str | None = None) -> dict[str, CatalogueEntry]:
    """{name: entry}; `path` (or $BERT_KERAS_CATALOGUE) replaces the built-in catalogue, e.g. for a mirror."""
    path = path or os.environ.get("BERT_KERAS_CATALOGUE") or _CATALOGUE
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)["checkpoints"]
    return {e["name"]: CatalogueEntry(**e) for e in entries}
