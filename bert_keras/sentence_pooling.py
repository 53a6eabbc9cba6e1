"""Token vectors -> one sentence vector, as sentence-transformers' `Pooling` module computes it.

A sentence-transformers model is an encoder, a pooling of its last layer's token vectors, optional Dense layers
and an optional L2 normalization (modules.json lists them; checkpoints/sentence_transformers.py reads them). This
is the pooling, in `keras.ops`, so the same `.keras` file runs on TensorFlow and JAX. Each mode follows
sentence-transformers 6.2's `Pooling._forward_padded` on right-padded rows (BERT's), down to its clamps:

  cls                   the first token the mask keeps: [CLS], or the first one after the prompt
  max                   the largest value of each dimension over the kept tokens (-inf where none is kept)
  mean                  sum over the kept tokens / max(count, 1e-9)
  mean_sqrt_len_tokens  sum over the kept tokens / sqrt(max(count, 1e-9))
  weightedmean          tokens weighted by position (1, 2, ... from [CLS]), / max(sum of kept weights, 1e-9)

Several modes concatenate in the order given. With `include_prompt=False` the prompt's tokens (the [CLS] and the
prompt's pieces: its tokenized length without the final [SEP], sentence-transformers' `prompt_length`) are left
out of the pooling, not of the attention: the encoder still sees them.
"""

from __future__ import annotations

import keras
from keras import ops

MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean")


@keras.saving.register_keras_serializable(package="bert_keras")
class SentencePooling(keras.layers.Layer):
    """Pools token vectors [B, S, H] into sentence vectors [B, len(modes) * H], as sentence-transformers does.

    Args:
        modes: str or list of str. One or more of "cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean";
            several are concatenated in the order given (sentence-transformers' `pooling_mode` tuple).
        include_prompt: bool. False leaves a prompt's tokens out of the pooling (`prompt_length` in `call`).
        **kwargs: keras.layers.Layer arguments (name, dtype).

    Inputs and outputs:
        call(sequence_output [B, S, H], input_mask [B, S] (1 for a token, 0 for padding), prompt_length: int or
        [B] int or None) -> [B, len(modes) * H] float32.

    Raises:
        ValueError: a mode outside MODES (lasttoken is a decoder model's, not BERT's).

    Example:
        >>> pool = SentencePooling("mean")
        >>> tokens = np.array([[[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]], "float32")
        >>> np.asarray(pool(tokens, np.array([[1, 1, 0]]))).tolist()
        [[2.0, 3.0]]
    """

    def __init__(self, modes="mean", *, include_prompt: bool = True, **kwargs):
        super().__init__(**kwargs)
        modes = [modes] if isinstance(modes, str) else list(modes)
        unknown = [m for m in modes if m not in MODES]
        if unknown or not modes:
            raise ValueError(f"pooling mode {unknown or modes} is not one BERT supports: give one or more of "
                             f"{', '.join(MODES)}")
        self.modes = modes
        self.include_prompt = bool(include_prompt)

    def call(self, sequence_output, input_mask, prompt_length=None):
        tokens = ops.cast(sequence_output, "float32")
        positions = ops.arange(ops.shape(tokens)[1], dtype="int32")[None, :]                        # [1, S]
        mask = ops.cast(input_mask, "int32")
        if prompt_length is not None and not self.include_prompt:
            length = ops.reshape(ops.cast(prompt_length, "int32"), (-1, 1))                         # [B or 1, 1]
            mask = ops.where(positions < length, 0, mask)
        kept = ops.cast(mask, "float32")[:, :, None]                                                # [B, S, 1]
        out = []
        for mode in self.modes:
            if mode == "cls":
                first = ops.argmax(mask, axis=1)                                                     # [B]
                out.append(ops.take_along_axis(tokens, ops.reshape(first, (-1, 1, 1)), axis=1)[:, 0])
            elif mode == "max":
                out.append(ops.max(ops.where(kept > 0, tokens, float("-inf")), axis=1))
            elif mode in ("mean", "mean_sqrt_len_tokens"):
                total = ops.sum(tokens * kept, axis=1)
                count = ops.maximum(ops.sum(kept, axis=1), 1e-9)
                out.append(total / (count if mode == "mean" else ops.sqrt(count)))
            else:                                                      # weightedmean: weights 1, 2, ... by position
                weights = kept * ops.cast(positions + 1, "float32")[:, :, None]
                out.append(ops.sum(tokens * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1e-9))
        return out[0] if len(out) == 1 else ops.concatenate(out, axis=-1)

    def compute_output_spec(self, sequence_output, input_mask, prompt_length=None):
        return keras.KerasTensor((sequence_output.shape[0], len(self.modes) * sequence_output.shape[-1]), "float32")

    def get_config(self):
        return {**super().get_config(), "modes": self.modes, "include_prompt": self.include_prompt}


@keras.saving.register_keras_serializable(package="bert_keras")
class L2Normalize(keras.layers.Layer):
    """x / max(||x||_2, 1e-12) on the last axis: sentence-transformers' `Normalize` (torch's F.normalize).

    Inputs and outputs:
        [B, D] -> [B, D] float32, each row of unit length (a zero row stays zero).

    Example:
        >>> np.asarray(L2Normalize()(np.array([[3.0, 4.0]], "float32"))).tolist()
        [[0.6000000238418579, 0.800000011920929]]
    """

    def call(self, x):
        x = ops.cast(x, "float32")
        return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)), 1e-12)
