"""How long a sequence a model source takes, read from its configuration alone, before its weights load: a
`--max-seq-length` past the model's learned positions (`max_position_embeddings`) is refused at once, not after
a run trains on short texts and the first long one fails inside the embedding lookup.

Sources as `loading.load_backbone` takes them: a preset (its BertConfig), a `.keras` file (the `config.json` in
its zip archive), a checkpoint folder or prefix (`bert_config.json` or Hugging Face's `config.json`), a
`finetune`/`pretrain --out` folder, a zoo folder or an already cached zoo name.
"""

from __future__ import annotations

import json
import os
import zipfile

KEY = "max_position_embeddings"
DEFAULT = 512            # BertConfig's default, and every released BERT's
MIN_LENGTH = 3           # [CLS], one word piece, [SEP]


def max_positions(source: str) -> int | None:
    """The number of positions (`max_position_embeddings`) of a model source, from its configuration only.

    Args:
        source: str. What `load_backbone` takes: a preset name, a `.keras` file, a checkpoint folder or prefix, a
            `bert-keras finetune`/`pretrain --out` folder, or a zoo name.

    Returns:
        int, or None when it cannot be told without loading the model (a zoo name not fetched yet, an unreadable
        file: the loader then says what is wrong).

    Example:
        >>> bert_keras.source_config.max_positions("bert_tiny")
        512
    """
    from bert_keras.config import PRESETS
    from bert_keras.storage import local_copy
    if source in PRESETS:
        return PRESETS[source].max_position_embeddings
    source = local_copy(source)                                         # a source on a bucket
    if os.path.isdir(source) and not os.path.exists(os.path.join(source, "zoo.json")):
        for saved in ("pretrainer.keras", "model.keras"):              # a `pretrain --out` or `finetune --out` folder
            if os.path.exists(os.path.join(source, saved)):
                return max_positions(os.path.join(source, saved))
    if source.endswith(".keras") and os.path.isfile(source):
        return _keras_file_positions(source)
    folder = source if os.path.isdir(source) else os.path.dirname(source)
    if not os.path.exists(source) and not os.path.exists(source + ".index"):
        from bert_keras.zoo.fetch import cache_dir
        folder = os.path.join(cache_dir(), "models", source)             # a zoo name, when fetched before
    for name in ("config.json", "bert_config.json"):
        value = _json_positions(os.path.join(folder or ".", name))
        if value is not None:
            return value
    return None


def check_max_seq_length(source: str, max_seq_length: int | None, flag: str = "--max-seq-length") -> None:
    """Refuses a sequence length the model source has no positions for (see `max_positions`).

    Args:
        source: str. The model source.
        max_seq_length: int or None (None: nothing to check).
        flag: how the length is named in the message (the command-line flag, or the Python argument).

    Raises:
        ValueError: `max_seq_length` is over the source's `max_position_embeddings`, or under 3.

    Example:
        >>> bert_keras.source_config.check_max_seq_length("bert_tiny", 384)
        >>> bert_keras.source_config.check_max_seq_length("bert_tiny", 1024)
        Traceback (most recent call last):
        ...
        ValueError: --max-seq-length 1024 is over the 512 positions of bert_tiny (its max_position_embeddings): give --max-seq-length 512 or less
    """
    if max_seq_length is None:
        return
    if max_seq_length < MIN_LENGTH:
        raise ValueError(f"{flag} {max_seq_length} leaves no room for a word: give at least {MIN_LENGTH} ([CLS], a "
                         "token, [SEP]; BERT's recipes use 128, or 384 for SQuAD)")
    limit = max_positions(source)
    if limit is not None and max_seq_length > limit:
        raise ValueError(f"{flag} {max_seq_length} is over the {limit} positions of {source} (its {KEY}): give "
                         f"{flag} {limit} or less")


def _json_positions(path: str) -> int | None:
    from bert_keras import storage                   # (the zoo's cache may be on a bucket)
    if not storage.isfile(path):
        return None
    try:
        with storage.open(path) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    return _find(config) if isinstance(config, dict) and _has_sizes(config) else None


def _has_sizes(config: dict) -> bool:
    return "hidden_size" in config or "num_hidden_layers" in config


def _keras_file_positions(path: str) -> int | None:
    """The first `max_position_embeddings` in a .keras archive's config.json (the encoder's, also inside a task
    model); None for a file that is not a readable archive (the loader names the problem)."""
    try:
        with zipfile.ZipFile(path) as z:
            config = json.loads(z.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return _find(config)


def _find(value) -> int | None:
    """The first `max_position_embeddings` in nested dicts and lists (a BertConfig without one: 512)."""
    if isinstance(value, dict):
        if KEY in value and isinstance(value[KEY], int):
            return value[KEY]
        if _has_sizes(value) and "vocab_size" in value:
            return DEFAULT
        for item in value.values():
            found = _find(item)
            if found is not None:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _find(item)
            if found is not None:
                return found
    return None
