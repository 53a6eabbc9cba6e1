"""The same models on TensorFlow, JAX and PyTorch: what changes with Keras' backend, in one place.

TensorFlow is always here: TF.Text's WordPiece, `tf.data` and every export run on it. The model math is
`keras.ops`, so the encoder and the heads run on whichever backend `KERAS_BACKEND` names (keras-hub's habit);
two TensorFlow-only fast paths (layers.swap_heads' bit view, layers.RealTokens' padding skip) sit behind
`on_tensorflow()` beside their portable twins. On JAX and PyTorch:
  - strings never reach the model: the preprocessor runs in `tf.data` on the host and yields NumPy ids;
  - the compiled step sees static shapes (XLA compiles once per shape), so batches are padded to a few lengths
    (`padded_length`: multiples of LENGTH_STEP) instead of each batch's longest, and padding is computed, as on a
    TPU; outputs at real tokens are the same;
  - a task's in-graph decoding (`serve`: the export's signature, the readable methods) stays TensorFlow, and
    reaches the model through `host_inference`, a `tf.numpy_function` that runs it on the backend.
The host pipeline's TensorFlow sees no accelerator on those backends (`hide_accelerators_from_tensorflow`): the
TPU or GPU belongs to JAX (or PyTorch), and a second claim on it fails.
"""

from __future__ import annotations

import os
import sys

import keras
import numpy as np
import tensorflow as tf

LENGTH_STEP = 32            # sequence lengths a JAX/PyTorch step compiles for: 32, 64, 96, ... (max_seq_length)


def backend() -> str:
    """Keras' backend: "tensorflow", "jax", "torch" (or "numpy")."""
    return keras.backend.backend()


def on_tensorflow() -> bool:
    """True on Keras' TensorFlow backend, where the TensorFlow-only fast paths and graph tracing apply."""
    return backend() == "tensorflow"


# What the `tensorflow` wheel (CUDA-enabled since 2.15) logs when it first looks for devices on a machine without
# NVIDIA's driver: "E ... cuda_platform.cc:51] failed call to cuInit: ... UNKNOWN ERROR (303)" (an ERROR line, so
# TF_CPP_MIN_LOG_LEVEL 1 shows it; tensorflow/tensorflow#37689), and at level 0 "Could not find cuda drivers".
NO_DRIVER_LINES = ("failed call to cuInit", "Could not find cuda drivers")


def find_devices_quietly() -> list:
    """TensorFlow's devices, found now (TensorFlow looks once a process: else at its first op), without the lines
    it logs on a machine with no GPU driver (NO_DRIVER_LINES); anything else it writes to stderr meanwhile is
    written there after. `import bert_keras` calls it when TF_CPP_MIN_LOG_LEVEL is the library's default, so a
    CPU-only machine prints nothing, while TensorFlow's other warnings and errors still show; a user who sets
    TF_CPP_MIN_LOG_LEVEL sees what that level shows.

    Why at the file descriptor: the line comes from C++ (TensorFlow's own logging, which reads its level once),
    and the wheel's CUDA stub fails before it reads CUDA_VISIBLE_DEVICES, so no setting skips the attempt.

    Returns:
        tf.config.list_physical_devices().

    Example:
        >>> [d.device_type for d in find_devices_quietly()][:1]
        ['CPU']
    """
    import tempfile
    try:
        saved = os.dup(2)
    except OSError:                       # no stderr to filter (a closed descriptor 2)
        return tf.config.list_physical_devices()
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        os.dup2(captured.fileno(), 2)
        try:
            devices = tf.config.list_physical_devices()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode("utf-8", "replace")
    kept = "".join(line for line in text.splitlines(keepends=True) if not any(n in line for n in NO_DRIVER_LINES))
    if kept:
        sys.stderr.write(kept)
        sys.stderr.flush()
    return devices


def hide_accelerators_from_tensorflow() -> None:
    """On JAX or PyTorch: TensorFlow (the host's tf.data and TF.Text) keeps off the GPUs and TPUs, which belong to
    the backend. No-op on TensorFlow, and once TensorFlow's devices are set up (then it is too late to change)."""
    if on_tensorflow():
        return
    try:
        tf.config.set_visible_devices([], "GPU")
        tf.config.set_visible_devices([], "TPU")
    except (RuntimeError, ValueError):          # devices already initialised, or no such device type
        pass


def padded_length(length, max_length: int):
    """A sequence length -> the length a JAX/PyTorch step runs at: the next multiple of LENGTH_STEP, at most
    `max_length` (and at least `length`). Works on ints and on TensorFlow scalars (in tf.data)."""
    if isinstance(length, (int, np.integer)):
        return max(int(length), min(-(-int(length) // LENGTH_STEP) * LENGTH_STEP, max_length))
    length = tf.cast(length, tf.int32)
    return tf.maximum(length, tf.minimum((length + LENGTH_STEP - 1) // LENGTH_STEP * LENGTH_STEP, max_length))


def pad_ids(ids: dict, length, pad_id: int) -> dict:
    """The id dict ([..., S] each) padded on its last axis to `length` ([PAD] ids, mask 0, segment 0)."""
    fill = {"input_word_ids": pad_id, "input_mask": 0, "input_type_ids": 0}
    out = {}
    for name, value in ids.items():
        extra = length - tf.shape(value)[-1]
        paddings = tf.concat([tf.zeros([tf.rank(value) - 1, 2], tf.int32), [[0, extra]]], 0)
        out[name] = tf.pad(value, paddings, constant_values=tf.cast(fill.get(name, 0), value.dtype))
    return out


def pad_batch_lengths(ds: tf.data.Dataset, pad_id: int, max_length: int, target_fill=None,
                      fixed: bool = False) -> tf.data.Dataset:
    """Batches of (id dict, targets) or id dicts -> the same, the ids padded to `padded_length` so a JAX or PyTorch
    step compiles for a handful of shapes, not one per batch's longest sequence (`fixed`: every batch to
    `max_length`, so per-token outputs of all batches concatenate). Targets with a sequence axis ([B, S], a tagger's
    labels) are padded with `target_fill`; None leaves targets alone."""
    def pad(*element):
        ids, targets = (element[0], element[1]) if len(element) == 2 else (element[0], None)
        length = max_length if fixed else padded_length(tf.shape(ids["input_word_ids"])[-1], max_length)
        ids = pad_ids(ids, length, pad_id)
        if targets is None:
            return ids
        if target_fill is not None:
            targets = tf.pad(targets, [[0, 0], [0, length - tf.shape(targets)[-1]]], constant_values=target_fill)
        return ids, targets
    return ds.map(tf.autograph.experimental.do_not_convert(pad), num_parallel_calls=tf.data.AUTOTUNE)


def distributed_devices() -> int:
    """How many devices Keras' distribution (JAX) splits a batch over; 1 without one."""
    distribution = keras.distribution.distribution() if not on_tensorflow() else None
    return 1 if distribution is None else int(np.size(distribution.device_mesh.devices))


def host_inference(model: keras.Model, ids: dict, pad_id: int, max_length: int):
    """model(ids, training=False) from TensorFlow code (a task's `serve`) when the model runs on JAX or PyTorch:
    a `tf.numpy_function` hands the ids to the backend as NumPy at a `padded_length` (so its compiled predict step
    is reused; rows padded to a multiple of the devices a data-parallel distribution splits them over), and the
    outputs come back trimmed to the ids' rows and length as float32 tensors of the model's structure.

    Args:
        model: a Keras model on the id dict (a task model).
        ids: dict of [B, S] (or [B, C, S]) int32 tensors.
        pad_id: int. The vocabulary's [PAD] id.
        max_length: int. The longest length the model takes (the preprocessor's max_seq_length).

    Returns:
        The model's outputs (a tensor or a dict), as tf.Tensor.
    """
    names = sorted(ids)
    specs = tf.nest.flatten(model.output)            # the functional model's output structure
    rank = ids["input_word_ids"].shape.rank

    def run(*arrays):
        x = dict(zip(names, arrays))
        length = x["input_word_ids"].shape[-1]
        padded = padded_length(length, max_length)
        if padded != length:          # the id inputs only (a masked LM's positions [B, P] stay as they are)
            fill = {"input_word_ids": pad_id}
            x = {k: np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, padded - length)], constant_values=fill.get(k, 0))
                 if k.startswith("input_") else v for k, v in x.items()}
        rows = x["input_word_ids"].shape[0]
        devices = distributed_devices()
        if rows % devices:        # a data-parallel step splits the batch over the devices: whole rows each
            x = {k: np.concatenate([v, np.repeat(v[-1:], devices - rows % devices, 0)]) for k, v in x.items()}
        out = tf.nest.flatten(model.predict_on_batch(x))
        # An output whose axis 1 is the sequence ([B, S] span logits, [B, S, K] tag logits) loses the padding.
        return [np.asarray(o[:rows, :length] if rank == 2 and s.shape[1] is None and o.ndim >= 2 else o[:rows],
                           np.float32) for o, s in zip(out, specs)]

    flat = tf.numpy_function(run, [ids[k] for k in names], [tf.float32] * len(specs), stateful=False)
    for tensor, spec in zip(flat, specs):
        tensor.set_shape([None] * len(spec.shape))
    return tf.nest.pack_sequence_as(model.output, flat)
