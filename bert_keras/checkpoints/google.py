"""google-research/bert TF1 checkpoints: `bert_model.ckpt.{index,data-*}` with names like
`bert/encoder/layer_0/attention/self/query/kernel`. Read with TF's checkpoint reader, written with SaveV2,
so the files we write load in the original code (`tf.compat.v1.train.init_from_checkpoint`)."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from bert_keras import storage
from bert_keras.atomic import atomic_directory
from bert_keras.preprocessing.vocab import save_vocab

# Training state that google-research checkpoints may carry beside the weights.
_SKIP_SUFFIXES = ("/adam_m", "/adam_v")
_SKIP_NAMES = ("global_step",)


def is_tf1_checkpoint(names) -> bool:
    """Do these checkpoint variable names look like google-research/bert's (`bert/...`)?"""
    return any(n.startswith("bert/") for n in names)


def read_google_checkpoint(prefix: str) -> dict:
    """{name: array} of the model weights in a TF1 checkpoint (optimizer slots and global_step dropped)."""
    reader = tf.train.load_checkpoint(prefix)
    names = [n for n in reader.get_variable_to_shape_map()
             if n not in _SKIP_NAMES and not n.endswith(_SKIP_SUFFIXES)]
    return {n: reader.get_tensor(n) for n in names}


def write_google_checkpoint(tensors: dict, folder: str, config=None, vocab_file: str | None = None,
                            prefix_name: str = "bert_model.ckpt") -> str:
    """Writes {name: array} as `folder/bert_model.ckpt.*` (+ bert_config.json, vocab.txt) atomically.

    The files are written into a temporary folder beside `folder` and renamed into place, so a reader never
    sees half a checkpoint. Returns the checkpoint prefix.
    """
    with atomic_directory(folder, last=(f"{prefix_name}.index",)) as tmp:     # (a bucket: the index last)
        names = sorted(tensors)
        tf.raw_ops.SaveV2(prefix=os.path.join(tmp, prefix_name), tensor_names=names,
                          shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(np.asarray(tensors[n])) for n in names])
        if config is not None:
            config.to_json_file(os.path.join(tmp, "bert_config.json"))
        if vocab_file:                             # a vocab.txt path, or the tokens in id order
            save_vocab(vocab_file, os.path.join(tmp, "vocab.txt"))
    return os.path.join(folder if storage.is_remote(folder) else os.path.abspath(folder), prefix_name)
