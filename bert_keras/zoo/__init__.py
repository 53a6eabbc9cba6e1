"""The model zoo: google-research's released checkpoints by name, fetched, verified, converted and cached."""

from __future__ import annotations

import json
import os

from bert_keras.zoo.catalogue import CatalogueEntry, load_catalogue
from bert_keras.zoo.fetch import ZooError, cache_dir, get


def from_preset(name: str, progress: bool = True, lower_case: bool | None = None, **preprocessor_kwargs):
    """(encoder, preprocessor) for a released checkpoint by name, a local archive or a checkpoint folder.

    A catalogue name (`bert-keras zoo list`: google-research's releases) is downloaded once, its SHA-256 and
    weights verified, converted to a `.keras` file and cached (in $BERT_KERAS_HOME, which may be a bucket such
    as gs://bucket/cache, else ~/.cache/bert_keras); later calls read the cache. The preprocessor is built from
    the checkpoint's own vocab.txt with the casing the checkpoint was trained with, so ids always match the weights.

    Args:
        name: str. A catalogue name, a downloaded `.zip`/`.tar.gz` archive, or an unpacked checkpoint folder.
        progress: bool. Print download progress.
        lower_case: bool or None. None uses the checkpoint's casing.
        **preprocessor_kwargs: passed to BertPreprocessor (seq_length, max_seq_length, truncation).

    Returns:
        (BertEncoder, BertPreprocessor).

    Raises:
        ZooError: an unknown name, a failed download or a checksum mismatch (the message says what to do).

    Example:
        >>> encoder, preprocessor = bert_keras.from_preset("bert_base_uncased")   # doctest: +SKIP
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> _ = bert_keras.save_google_checkpoint(encoder, "my_checkpoint", vocab_file="vocab.txt")
        >>> encoder, preprocessor = bert_keras.from_preset("my_checkpoint", seq_length=32)
        >>> encoder.config.num_hidden_layers, preprocessor.lower_case, preprocessor.seq_length
        (2, True, 32)
    """
    import keras

    import bert_keras.encoder  # noqa: F401  (registers the layers for load_model)
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.storage import local_copy
    folder = local_copy(get(name, progress=progress))      # a cache on a bucket ($BERT_KERAS_HOME=gs://...)
    with open(os.path.join(folder, "zoo.json"), encoding="utf-8") as f:
        metadata = json.load(f)
    encoder = keras.models.load_model(os.path.join(folder, "model.keras"))
    if lower_case is None:                          # the checkpoint's own casing, else read from its vocabulary
        lower_case = metadata.get("lower_case")
    preprocessor = BertPreprocessor(os.path.join(folder, "vocab.txt"), lower_case=lower_case, **preprocessor_kwargs)
    return encoder, preprocessor


__all__ = ["CatalogueEntry", "ZooError", "cache_dir", "from_preset", "get", "load_catalogue"]
