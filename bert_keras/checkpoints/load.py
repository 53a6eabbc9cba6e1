"""load_checkpoint: any released BERT checkpoint -> (BertConfig, BertEncoder with its weights).

Formats, detected from the files:
  google-research TF1   bert_config.json + bert_model.ckpt.{index,data-*}   names `bert/encoder/layer_0/...`
  Model Garden TF2      bert_config.json + an object-based checkpoint         names `encoder/layer_with_weights-0/...`
  Hugging Face          config.json + model.safetensors                      names `encoder.layer.0....`
`path` is the checkpoint's folder, or a TF checkpoint prefix (`.../bert_model.ckpt`).
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_keras.checkpoints.garden import is_garden_checkpoint, read_garden_checkpoint
from bert_keras.checkpoints.google import is_tf1_checkpoint, read_google_checkpoint, write_google_checkpoint
from bert_keras.checkpoints.huggingface import read_huggingface
from bert_keras.checkpoints.names import assign_encoder_weights, encoder_weights, split_heads
from bert_keras.config import BertConfig


def _tf_prefix(path: str) -> str | None:
    """The checkpoint prefix for a folder or prefix path, or None when there is no TF checkpoint."""
    if os.path.exists(path + ".index"):
        return path
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0][: -len(".index")])
        if len(indexes) > 1:
            raise ValueError(f"{path} holds several checkpoints ({', '.join(indexes)}): pass the prefix of one.")
    return None


def read_checkpoint(path: str, config: BertConfig | None = None) -> tuple[BertConfig, dict, str]:
    """Reads a checkpoint of any supported format into (config, {google name: array}, format name)."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        hf_config = os.path.join(folder, "config.json")
        if config is None and not os.path.exists(hf_config):
            raise FileNotFoundError(f"{hf_config} not found: a Hugging Face folder needs its config.json.")
        return config or BertConfig.from_json_file(hf_config), read_huggingface(folder), "huggingface"
    prefix = _tf_prefix(path)
    if prefix is None:
        raise FileNotFoundError(
            f"No checkpoint at {path}: expected bert_model.ckpt.index (google-research or Model Garden) "
            "or model.safetensors + config.json (Hugging Face).")
    if config is None:
        config_file = os.path.join(folder, "bert_config.json")
        if not os.path.exists(config_file):
            raise FileNotFoundError(f"{config_file} not found: put the checkpoint's bert_config.json beside it "
                                    "or pass config=BertConfig(...).")
        config = BertConfig.from_json_file(config_file)
    names = [n for n, _ in tf.train.list_variables(prefix)]
    if is_tf1_checkpoint(names):
        return config, read_google_checkpoint(prefix), "google"
    if is_garden_checkpoint(names):
        return config, read_garden_checkpoint(prefix), "garden"
    raise ValueError(f"{prefix} is neither a google-research BERT checkpoint (names 'bert/...') nor a Model "
                     f"Garden BertEncoder checkpoint (names '<root>/layer_with_weights-N/...'); "
                     f"first names: {names[:3]}")


def load_checkpoint(path: str, config: BertConfig | None = None):
    """Returns (config, encoder) with the checkpoint's weights; pretraining heads, if any, are left out."""
    config, tensors, fmt = read_checkpoint(path, config)
    weights, _heads = split_heads(tensors)
    from bert_keras.encoder import BertEncoder
    encoder = BertEncoder(config)
    assign_encoder_weights(encoder, weights, source=f"{fmt} checkpoint {path}")
    return config, encoder


def save_google_checkpoint(encoder, folder: str, vocab_file: str | None = None, heads: dict | None = None) -> str:
    """Writes the encoder (and optional `cls/...` heads) as a google-research TF1 checkpoint folder."""
    tensors = encoder_weights(encoder)
    tensors.update(heads or {})
    return write_google_checkpoint(tensors, folder, config=encoder.config, vocab_file=vocab_file)
