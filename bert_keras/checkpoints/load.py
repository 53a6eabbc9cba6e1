"""load_checkpoint: any released BERT checkpoint -> (BertConfig, BertEncoder with its weights).

Formats, detected from the files:
  google-research TF1   bert_config.json + bert_model.ckpt.{index,data-*}   names `bert/encoder/layer_0/...`
  Model Garden TF2      bert_config.json + an object-based checkpoint         names `encoder/layer_with_weights-0/...`
  Hugging Face          config.json + model.safetensors                      names `encoder.layer.0....`
`path` is the checkpoint's folder, or a TF checkpoint prefix (`.../bert_model.ckpt`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import warnings

import tensorflow as tf

from bert_keras.checkpoints.garden import is_garden_checkpoint, is_garden_classifier, read_garden_checkpoint
from bert_keras.checkpoints.google import is_tf1_checkpoint, read_google_checkpoint, write_google_checkpoint
from bert_keras.checkpoints.huggingface import read_huggingface
from bert_keras.checkpoints.huggingface_tasks import task_names
from bert_keras.checkpoints.names import (CLASSIFIER_NAMES, POOLER_NAMES, assign_encoder_weights, encoder_weights,
                                         split_heads)
from bert_keras.config import BertConfig


class MissingPoolerWarning(UserWarning):
    """A checkpoint without pooler weights was loaded: the encoder's `pooled_output` comes from random weights."""


@contextlib.contextmanager
def pooler_unused():
    """Within: loading a checkpoint without pooler weights warns nothing (MissingPoolerWarning). For the loads
    whose pooler is never read (features, attention maps, the masked LM, token and span heads) or is trained
    (fine-tuning, pretraining): the warning is for those that read an untrained `pooled_output`.

    Example:
        >>> with pooler_unused():
        ...     config, encoder = load_checkpoint("hf_masked_lm_folder")   # doctest: +SKIP
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingPoolerWarning)
        yield


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


def unreadable_checkpoint(prefix: str, error) -> Exception:
    """The error for a TF checkpoint TensorFlow cannot read (`error`: a tf.errors.OpError, or the IndexError its
    reader raises for a data file cut short): FileNotFoundError naming a missing data file, else ValueError
    (damaged or cut short); both say to fetch the checkpoint again."""
    problem = (getattr(error, "message", None) or str(error) or type(error).__name__).strip().splitlines()[0]
    data = sorted(glob.glob(glob.escape(prefix) + ".data-*"))
    if isinstance(error, tf.errors.NotFoundError) or "No such file" in problem or not data:
        return FileNotFoundError(f"the checkpoint {prefix} is incomplete: {problem} (its .index names data files "
                                 f"that are not there; found: {', '.join(map(os.path.basename, data)) or 'none'}): "
                                 "download or copy the whole checkpoint again")
    return ValueError(f"the checkpoint {prefix} cannot be read ({problem}): a file is damaged or cut short; download "
                      "or copy the whole checkpoint again")


def read_checkpoint(path: str, config: BertConfig | None = None) -> tuple[BertConfig, dict, str]:
    """Reads a checkpoint of any supported format into (config, {google name: array}, format name).

    The format is detected from the files (see the module docstring) and every name is translated to
    google-research's (`bert/encoder/layer_0/attention/self/query/kernel`), so one mapping serves all three.
    Pretraining heads (`cls/...`) are included when the checkpoint has them; optimizer slots are not.

    Args:
        path: str. A checkpoint folder, or a TF checkpoint prefix (`.../bert_model.ckpt`).
        config: BertConfig or None. None reads `bert_config.json` (or Hugging Face's `config.json`) beside it.

    Returns:
        (BertConfig, {google-research name: NumPy array}, "google" | "garden" | "huggingface").

    Raises:
        FileNotFoundError: no checkpoint, or no config beside it (the message names the file to add), or a data
            file the checkpoint's index names is missing.
        ValueError: a TF checkpoint of another model, a folder holding several checkpoints, or a damaged or
            truncated file.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> prefix = bert_keras.save_google_checkpoint(encoder, "tiny_checkpoint", vocab_file="vocab.txt")
        >>> config, tensors, fmt = bert_keras.read_checkpoint("tiny_checkpoint")
        >>> fmt, tensors["bert/embeddings/word_embeddings"].shape
        ('google', (30522, 128))
    """
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
    try:
        names = [n for n, _ in tf.train.list_variables(prefix)]
        if is_tf1_checkpoint(names):
            return config, read_google_checkpoint(prefix), "google"
        if is_garden_checkpoint(names):
            return config, read_garden_checkpoint(prefix), "garden"
    except (tf.errors.OpError, IndexError) as e:    # a data file missing, or cut short ("Read less bytes ...")
        raise unreadable_checkpoint(prefix, e) from None
    raise ValueError(f"{prefix} is neither a google-research BERT checkpoint (names 'bert/...') nor a Model "
                     f"Garden BertEncoder checkpoint (names '<root>/layer_with_weights-N/...'); "
                     f"first names: {names[:3]}")


def has_classifier_head(path: str) -> bool:
    """Does the TF checkpoint at `path` hold a fine-tuned classifier's head: google-research run_classifier.py's
    `output_weights`/`output_bias`, or a Model Garden BertClassifier's? (Reads the index only; False for any
    other source.)"""
    try:
        prefix = _tf_prefix(path)
        names = [n for n, _ in tf.train.list_variables(prefix)] if prefix else []
    except (ValueError, tf.errors.OpError):
        return False
    return (set(CLASSIFIER_NAMES) <= set(names) and is_tf1_checkpoint(names)) or is_garden_classifier(names)


def load_checkpoint(path: str, config: BertConfig | None = None):
    """A BertEncoder with a released checkpoint's weights: google-research TF1, Model Garden TF2 or Hugging Face.

    Every encoder weight must be found with the right shape (a missing or mis-shaped one is named), so a
    checkpoint of another size fails loudly instead of loading half. Pretraining heads are left out (see
    `read_checkpoint` and `BertPretrainer.assign_heads`). The vocabulary is not read: build the
    BertPreprocessor from the `vocab.txt` beside the checkpoint (or use `loading.load_backbone`, which does).

    Args:
        path: str. A checkpoint folder, or a TF checkpoint prefix (`.../bert_model.ckpt`).
        config: BertConfig or None. None reads the config file beside the checkpoint.

    Returns:
        (BertConfig, BertEncoder).

    Raises:
        FileNotFoundError: no checkpoint or no config at `path`.
        ValueError: an unknown checkpoint layout, or weights missing or of the wrong shape.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> prefix = bert_keras.save_google_checkpoint(encoder, "tiny_checkpoint", vocab_file="vocab.txt")
        >>> config, loaded = bert_keras.load_checkpoint("tiny_checkpoint")
        >>> config.num_hidden_layers, np.array_equal(loaded.pooler.kernel, encoder.pooler.kernel)
        (2, True)
    """
    config, encoder, _heads = load_checkpoint_with_heads(path, config)
    return config, encoder


def load_checkpoint_with_heads(path: str, config: BertConfig | None = None):
    """`load_checkpoint` plus the heads the checkpoint holds ({`cls/...` name: array} for the pretraining heads,
    `output_weights` [C, H] and `output_bias` for a fine-tuned classifier's; maybe empty).

    A checkpoint without a pooler (Hugging Face's `BertForMaskedLM` saves none) loads with the pooler at its
    initial weights and a MissingPoolerWarning, as transformers does (not within `pooler_unused()`, for callers
    that never read the pooler or train it); every other weight must be there. A Hugging Face task
    folder's head (`classifier.*`, `qa_outputs.*`) is not returned (huggingface_tasks.read_task_head reads it);
    its token and span models have no pooler, and load without the warning (their heads never use it).

    Args:
        path: str. A checkpoint folder, or a TF checkpoint prefix.
        config: BertConfig or None. None reads the config file beside the checkpoint.

    Returns:
        (BertConfig, BertEncoder, {`cls/...` or `output_*` name: NumPy array}).

    Example:
        >>> model = bert_keras.tasks.BertPretrainer(bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")))
        >>> _ = bert_keras.save_google_checkpoint(model.encoder, "pretrained", heads=model.head_weights())
        >>> config, encoder, heads = bert_keras.checkpoints.load_checkpoint_with_heads("pretrained")
        >>> sorted(heads)[0]
        'cls/predictions/output_bias'
    """
    config, tensors, fmt = read_checkpoint(path, config)
    weights, heads = split_heads(tensors)
    from bert_keras.encoder import BertEncoder
    encoder = BertEncoder(config)
    assign_encoder_weights(encoder, weights, source=f"{fmt} checkpoint {path}", optional=POOLER_NAMES)
    # A token or span model of transformers (add_pooling_layer=False) has no pooler, and its head never uses one.
    poolerless_task = fmt == "huggingface" and getattr(task_names(path), "pooler", True) is False
    if not set(POOLER_NAMES) <= set(weights) and not poolerless_task:
        warnings.warn(f"{path} has no pooler weights (a Hugging Face BertForMaskedLM saves none): the pooler keeps "
                      "its random initial weights; fine-tune it, or use a checkpoint with bert/pooler/dense/*",
                      MissingPoolerWarning, stacklevel=2)
    return config, encoder, heads


def save_google_checkpoint(encoder, folder: str, vocab_file: str | None = None, heads: dict | None = None) -> str:
    """Writes the encoder as a google-research TF1 checkpoint folder, readable by run_classifier.py & co.

    The folder gets `bert_model.ckpt.{index,data-*}` under google-research's variable names, `bert_config.json`
    and (given) `vocab.txt`; it is written beside and renamed into place, so no reader sees half a checkpoint.

    Args:
        encoder: BertEncoder. The weights to write.
        folder: str. The checkpoint folder (replaced if it exists).
        vocab_file: str, list of str or None. A `vocab.txt` to copy into the folder, or the tokens in id order.
        heads: dict or None. Pretraining heads {`cls/...` name: array}, e.g. `BertPretrainer.head_weights()`.

    Returns:
        str, the checkpoint prefix (`<folder>/bert_model.ckpt`, absolute).

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> prefix = bert_keras.save_google_checkpoint(encoder, "tiny_checkpoint", vocab_file="vocab.txt")
        >>> sorted(os.listdir("tiny_checkpoint"))[:3]
        ['bert_config.json', 'bert_model.ckpt.data-00000-of-00001', 'bert_model.ckpt.index']
    """
    tensors = encoder_weights(encoder)
    tensors.update(heads or {})
    return write_google_checkpoint(tensors, folder, config=encoder.config, vocab_file=vocab_file)
