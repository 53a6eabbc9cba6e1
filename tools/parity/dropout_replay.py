"""Dropout replay: bert_keras and transformers draw the same dropout masks, so a paired comparison differs only in
float rounding (tools/parity/compare_steps_torch.py and tools/parity/acceptance_finetune.py, --replay-dropout).

A training step's dropout calls are its sites, numbered in the order the forward pass reaches them. That order is
the same on both sides: the embeddings; per layer the attention probabilities, the attention output and the
feed-forward output; then the head's dropout if it has one (classification, multiple choice, tagging; not SQuAD).
Site k of step t keeps an element where

    tf.random.stateless_uniform(shape, seed=[k, t]) >= rate,     then scales the kept ones by 1 / (1 - rate),

with `shape` bert_keras' tensor at that site. bert_keras skips padding in a block's position-wise parts, so its
attention and feed-forward outputs are [T, H] over the T real tokens (row-major, layers.RealTokens); under a
pooled head (classification, multiple choice) its last layer computes only [CLS]: probabilities [B, N, 1, S] and
outputs [B, H]. The torch side draws the mask in that shape and places it into its own [B, S, H] / [B, N, S, S]
tensor; positions bert_keras does not compute (padding, the last layer's other rows) keep everything, since
nothing downstream reads them. Both sides must pad a batch to the same length (acceptance_finetune --paired hands
the reference ours' lengths), or the embeddings' and attention's masks are drawn in other shapes. Drawing the masks
costs time on both sides; no speed figure comes from a replayed run.

Only for tools: it patches keras.layers.Dropout (before the model is built) and torch.nn.functional.dropout.
"""

from __future__ import annotations

# task -> (pooled: its head reads only [CLS], so bert_keras' last layer computes only that row; head_dropout: its
# head has a dropout layer)
TASK_LAYOUT = {"sst-2": (True, True), "openbookqa": (True, True), "conll2003": (False, True), "squad": (False, False)}


def keep_mask(shape, site: int, step, rate: float):
    """[shape] bool: the keep-mask of `site` at `step` (a Python int or a scalar integer tensor)."""
    import tensorflow as tf
    seed = tf.stack([tf.constant(site, tf.int64), tf.cast(step, tf.int64)])
    return tf.random.stateless_uniform(shape, seed=seed, dtype=tf.float32) >= rate


def sites_per_step(num_layers: int, head_dropout: bool) -> int:
    return 1 + 3 * num_layers + int(head_dropout)


class KerasReplay:
    """Patches keras.layers.Dropout.call while active: under a traced training step, the n-th dropout call of the
    traced function is site n and reads the step from `step` (set it to the optimizer's iterations before the
    first training step traces). Use as a context manager around building and training the model."""

    def __init__(self):
        self.step = None
        self.sites = {}                                   # traced graph -> dropout calls so far

    def __enter__(self):
        import keras
        import tensorflow as tf
        self._original = original = keras.layers.Dropout.call
        replay = self

        def call(layer, inputs, training=False):
            if not training or layer.rate == 0:
                return original(layer, inputs, training=training)
            if tf.executing_eagerly():
                raise RuntimeError("dropout replay numbers the calls of a traced step: run the model compiled "
                                   "(run_eagerly=False)")
            if replay.step is None:
                raise RuntimeError("dropout replay: set .step (the optimizer's iterations) before training")
            graph = tf.compat.v1.get_default_graph()
            site = replay.sites.get(graph, 0)
            replay.sites[graph] = site + 1
            keep = keep_mask(tf.shape(inputs), site, replay.step, layer.rate)
            return inputs * tf.cast(keep, inputs.dtype) * (1.0 / (1.0 - layer.rate))

        keras.layers.Dropout.call = call
        return self

    def __exit__(self, *exc):
        import keras
        keras.layers.Dropout.call = self._original

    def check(self, num_layers: int, head_dropout: bool):
        """Raises unless every traced training step made sites_per_step dropout calls (and one was traced)."""
        expected = sites_per_step(num_layers, head_dropout)
        counts = list(self.sites.values())
        if not counts or any(n != expected for n in counts):
            raise RuntimeError(f"dropout replay: traced steps made {counts} dropout calls, expected {expected} each")


class TorchReplay:
    """Patches torch.nn.functional.dropout while active; call `begin(step, attention_mask)` before each training
    forward pass and `end()` after it. The model must use eager attention (attn_implementation="eager"), whose
    attention-probability dropout goes through torch.nn.functional.dropout.

    num_layers: encoder layers; pooled: the head reads only [CLS] (classification, multiple choice), so bert_keras'
    last layer computes only that row; head_dropout: the head has a dropout (all but SQuAD)."""

    def __init__(self, num_layers: int, pooled: bool, head_dropout: bool):
        self.num_layers, self.pooled, self.head_dropout = num_layers, pooled, head_dropout
        self.step = None

    def __enter__(self):
        import torch
        self._original = original = torch.nn.functional.dropout

        def dropout(x, p=0.5, training=True, inplace=False):
            if not training or p == 0:
                return original(x, p, training, inplace)
            return self._replay(x, p)

        torch.nn.functional.dropout = dropout
        return self

    def __exit__(self, *exc):
        import torch
        torch.nn.functional.dropout = self._original

    def begin(self, step: int, attention_mask):
        """attention_mask: the batch's [B, S] or [B, C, S] (multiple choice: flattened as the model does)."""
        self.step, self.site = step, 0
        self.real = attention_mask.reshape(-1, attention_mask.shape[-1]).bool()        # [B', S]

    def end(self):
        expected = sites_per_step(self.num_layers, self.head_dropout)
        if self.site != expected:
            raise RuntimeError(f"dropout replay: {self.site} dropout calls in a step, expected {expected} (is the "
                               "model on eager attention?)")
        self.step = None

    def _replay(self, x, p):
        import torch
        if self.step is None:
            raise RuntimeError("dropout replay: call begin(step, attention_mask) before a training forward pass")
        site = self.site
        self.site += 1
        layer, part = divmod(site - 1, 3)
        in_block = 1 <= site <= 3 * self.num_layers
        cls_only = in_block and self.pooled and layer == self.num_layers - 1
        if in_block and part == 0:                                    # attention probabilities [B', N, S, S]
            if cls_only:
                full = torch.ones_like(x, dtype=torch.bool)
                full[:, :, :1] = self._draw((x.shape[0], x.shape[1], 1, x.shape[3]), site, p)
            else:
                full = self._draw(tuple(x.shape), site, p)
        elif in_block:                                                # attention / feed-forward output [B', S, H]
            full = torch.ones_like(x, dtype=torch.bool)
            if cls_only:
                full[:, 0] = self._draw((x.shape[0], x.shape[2]), site, p)
            else:
                full[self.real] = self._draw((int(self.real.sum()), x.shape[2]), site, p)
        else:                                                         # embeddings, head: the same shape
            full = self._draw(tuple(x.shape), site, p)
        return x * full.to(x.dtype) * (1.0 / (1.0 - p))

    def _draw(self, shape, site, p):
        import torch
        return torch.from_numpy(keep_mask(shape, site, self.step, p).numpy())
