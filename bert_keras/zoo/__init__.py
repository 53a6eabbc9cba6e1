"""The model zoo: google-research's released checkpoints by name, fetched, verified, converted and cached."""

from __future__ import annotations

import json
import os

from bert_keras.zoo.catalogue import CatalogueEntry, load_catalogue
from bert_keras.zoo.fetch import ZooError, cache_dir, get


def from_preset(name: str, progress: bool = True, lower_case: bool | None = None, **preprocessor_kwargs):
    """(encoder, preprocessor) for a catalogue name, a local archive or a checkpoint folder.

    The preprocessor is built from the checkpoint's own vocab.txt with the casing the checkpoint was trained
    with, so ids always match the weights. `preprocessor_kwargs` go to BertPreprocessor (e.g. seq_length).
    """
    import keras

    import bert_keras.encoder  # noqa: F401  (registers the layers for load_model)
    from bert_keras.preprocessing import BertPreprocessor
    folder = get(name, progress=progress)
    with open(os.path.join(folder, "zoo.json"), encoding="utf-8") as f:
        metadata = json.load(f)
    encoder = keras.models.load_model(os.path.join(folder, "model.keras"))
    if lower_case is None:                          # the checkpoint's own casing, else read from its vocabulary
        lower_case = metadata.get("lower_case")
    preprocessor = BertPreprocessor(os.path.join(folder, "vocab.txt"), lower_case=lower_case, **preprocessor_kwargs)
    return encoder, preprocessor


__all__ = ["CatalogueEntry", "ZooError", "cache_dir", "from_preset", "get", "load_catalogue"]
