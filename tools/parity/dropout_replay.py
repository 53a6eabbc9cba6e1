"""Dropout replay: bert_keras and transformers draw the same dropout masks, so a paired comparison differs only in
float rounding (tools/parity/compare_steps_torch.py and tools/parity/acceptance_finetune.py, --replay-dropout).

A training step's dropout calls are its sites, numbered in the order the forward pass reaches them. That order is
the same on both sides: the embeddings; per layer the attention probabilities, the attention output and the
feed-forward output; then the head's dropout if it has one (classification, multiple choice, tagging; not SQuAD).
Site k of step t keeps an element where

    tf.random.stateless_uniform(shape, seed=site_seed(k, t)) >= rate,     then scales the kept ones by 1 / (1 - rate),

with `shape` bert_keras' tensor at that site. That is exactly what a Keras 3 `keras.layers.Dropout` draws from its
own `seed_generator` (keras.random.SeedGenerator: a [seed, counter] state; each training call draws
tf.nn.experimental.stateless_dropout with the state as the seed, then adds 1 to the counter). So nothing is
patched on bert_keras' side: KerasReplay sets each dropout layer's state before a step, and site_seed numbers the
seeds as those layers then draw them. A layer that serves several sites (a block's `output_dropout`: the attention
output, then the feed-forward output) is called that many times a step, so its seeds are [its first site,
calls x t + j] for its j-th call.

bert_keras skips padding in a block's position-wise parts, so its attention and feed-forward outputs are [T, H] over
the T real tokens (row-major, layers.RealTokens); under a pooled head (classification, multiple choice) its last
layer computes only [CLS]: probabilities [B, N, 1, S] and outputs [B, H]. The torch side draws the mask in that
shape and places it into its own [B, S, H] / [B, N, S, S] tensor; positions bert_keras does not compute (padding,
the last layer's other rows) keep everything, since nothing downstream reads them. Both sides must pad a batch to the
same length (acceptance_finetune --paired hands the reference ours' lengths), or the embeddings' and attention's
masks are drawn in other shapes. float32 only (a float16/bfloat16 Dropout draws its uniforms in that type). Drawing
the masks costs time on both sides; no speed figure comes from a replayed run.

transformers has no per-layer generator to seed: TorchReplay swaps torch.nn.functional.dropout while active (the one
patch left in the tools, of the reference, never of bert_keras).

Keras on JAX draws other masks from the same seed states (jax.random, not TensorFlow's Philox): for JAX against
TensorFlow, JaxDrawsTensorflowMasks computes TensorFlow's numbers in jax.numpy (tensorflow_uniform_at) and swaps
Keras' JAX dropout while active (tools/parity/acceptance_backends.py).
"""

from __future__ import annotations

# task -> (pooled: its head reads only [CLS], so bert_keras' last layer computes only that row; head_dropout: its
# head has a dropout layer)
TASK_LAYOUT = {"sst-2": (True, True), "openbookqa": (True, True), "conll2003": (False, True), "squad": (False, False)}


def site_seed(site: int, step: int, num_layers: int) -> tuple[int, int]:
    """The stateless seed of dropout site `site` at training step `step`: (the first site of the Keras layer that
    draws it, that layer's draws before it). A block's sites 1+3i (attention probabilities: its own layer), 2+3i and
    3+3i (attention and feed-forward output: one `output_dropout` layer, called twice a step)."""
    if 1 <= site <= 3 * num_layers and (site - 1) % 3 != 0:
        first = site - (site - 1) % 3 + 1                 # the block's output_dropout: first used at 2+3i
        return first, 2 * step + (site - first)
    return site, step


def keep_mask(shape, seed, rate: float):
    """[shape] bool: the keep-mask drawn with stateless `seed` (a pair of ints, see site_seed)."""
    import tensorflow as tf
    return tf.random.stateless_uniform(shape, seed=tf.constant(seed, tf.int64), dtype=tf.float32) >= rate


def sites_per_step(num_layers: int, head_dropout: bool) -> int:
    return 1 + 3 * num_layers + int(head_dropout)


class KerasReplay:
    """Seeds a bert_keras task model's dropout layers for replay: `start(step)` before a training step sets each
    keras.layers.Dropout's seed_generator state to (its first site, calls a step x step), so the step draws
    site_seed's masks; `callback()` does it before every training batch of model.fit (from the optimizer's
    iterations). `check(steps)` after training: each layer drew exactly its calls a step, `steps` times.

    model: a bert_keras task model (its `encoder`, and a "head_dropout" layer if its head has one)."""

    def __init__(self, model):
        import keras
        encoder = model.encoder
        self.num_layers = len(encoder.transformer_layers)
        self.layers = [(encoder.embeddings.dropout, 0, 1)]        # (Dropout, its first site, its calls a step)
        for i, block in enumerate(encoder.transformer_layers):
            self.layers += [(block.attention_probs_dropout, 1 + 3 * i, 1), (block.output_dropout, 2 + 3 * i, 2)]
        heads = [layer for layer in model.layers if layer.name == "head_dropout"]
        if heads:
            self.layers.append((heads[0], 1 + 3 * self.num_layers, 1))
        self.head_dropout = bool(heads)
        for layer, _, _ in self.layers:
            if not isinstance(layer, keras.layers.Dropout) or not hasattr(layer, "seed_generator"):
                raise ValueError(f"dropout replay: {layer.name} is not a keras.layers.Dropout with a rate above 0")

    def start(self, step: int) -> None:
        for layer, site, calls in self.layers:
            layer.seed_generator.state.assign([site, calls * int(step)])

    def callback(self):
        import keras
        replay = self

        class StartEachStep(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                replay.start(int(self.model.optimizer.iterations))
        return StartEachStep()

    def check(self, steps: int) -> None:
        """Raises unless every dropout layer's counter says it drew its calls a step (started at step 0, or at the
        last start, and `steps` counted from there)."""
        wrong = [(layer.name, int(layer.seed_generator.state[1]), calls * steps) for layer, _, calls in self.layers
                 if int(layer.seed_generator.state[1]) != calls * steps]
        if wrong:
            raise RuntimeError(f"dropout replay: layers drew other than their calls a step: {wrong} "
                               "(name, counter, expected)")


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
        return torch.from_numpy(keep_mask(shape, site_seed(site, self.step, self.num_layers), p).numpy())


# --- JAX drawing TensorFlow's masks (tools/parity/acceptance_backends.py: JAX against TensorFlow, same draws) ---
#
# Keras' Dropout turns the same seed state into other masks on each backend: TensorFlow's
# tf.nn.experimental.stateless_dropout (Philox-4x32-10, TensorFlow's key schedule) against JAX's
# jax.random.bernoulli (threefry). tensorflow_uniform_at computes TensorFlow's numbers in jax.numpy, so a JAX run
# under JaxDrawsTensorflowMasks keeps exactly the elements the TensorFlow run keeps.

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)           # TensorFlow's random::PhiloxRandom (core/lib/random/philox_random.h)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_SEED_KEY = (0x3EC8F720, 0x02461E29)           # the fixed key that scrambles a stateless seed (GenerateKey)


def _mul_hi_lo(a: int, b):
    """(high, low) 32-bit halves of the 64-bit product a * b, in uint32 arithmetic only (JAX runs without x64)."""
    import jax.numpy as jnp
    a_lo, a_hi = jnp.uint32(a & 0xFFFF), jnp.uint32(a >> 16)
    b_lo, b_hi = b & jnp.uint32(0xFFFF), b >> jnp.uint32(16)
    ll, lh, hl, hh = b_lo * a_lo, b_lo * a_hi, b_hi * a_lo, b_hi * a_hi
    mid = (ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)
    return hh + (lh >> 16) + (hl >> 16) + (mid >> 16), b * jnp.uint32(a)


def _philox(counter, key):
    """Philox-4x32-10 of a 4-word counter under a 2-word key (each a uint32 array or scalar): 4 uint32 words."""
    import jax.numpy as jnp
    c, k = list(counter), list(key)
    for r in range(10):
        hi0, lo0 = _mul_hi_lo(_PHILOX_M[0], c[0])
        hi1, lo1 = _mul_hi_lo(_PHILOX_M[1], c[2])
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
        if r < 9:
            k = [k[0] + jnp.uint32(_PHILOX_W[0]), k[1] + jnp.uint32(_PHILOX_W[1])]
    return c


def tensorflow_uniform_at(index, seed):
    """float32 numbers of tf.random.stateless_uniform(shape, seed) at the flat element numbers `index` (an int32
    array of any shape; element i of a [shape] draw in row-major order), computed with jax.numpy.

    TensorFlow (StatelessRandomGetKeyCounter, then the CPU kernel's FillPhiloxRandom): the seed pair, as two
    64-bit words, is scrambled by one Philox call under a fixed key into the key (its first two words) and the
    counter's high half; element i is word i % 4 of Philox at counter (i // 4, 0, high half); a word becomes a
    float in [0, 1) from its low 23 bits (1.mantissa - 1).

    Args:
        index: int32 array, element numbers (0 <= index < 2**31).
        seed: [2] uint32/int32 array or pair of ints, each below 2**32 (Keras' seed state: [seed, counter]).
    Returns: float32 array of index's shape.

    Example:
        >>> u = tensorflow_uniform_at(jnp.arange(6).reshape(2, 3), (3, 0))   # doctest: +SKIP
        >>> # == tf.random.stateless_uniform([2, 3], seed=(3, 0))
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    seed = seed.astype(jnp.uint32) if isinstance(seed, jax.Array) else jnp.asarray(np.asarray(seed, np.uint32))
    zero = jnp.uint32(0)
    mix = _philox([seed[0], zero, seed[1], zero], [jnp.uint32(_SEED_KEY[0]), jnp.uint32(_SEED_KEY[1])])
    index = jnp.asarray(index).astype(jnp.uint32)
    words = _philox([index >> 2, jnp.zeros_like(index), jnp.broadcast_to(mix[2], index.shape),
                     jnp.broadcast_to(mix[3], index.shape)], mix[:2])
    word = jnp.choose(index & 3, words, mode="clip")                   # element i: word i % 4 (traceable)
    return jax.lax.bitcast_convert_type((word & 0x7FFFFF) | jnp.uint32(127 << 23), jnp.float32) - jnp.float32(1)


class JaxDrawsTensorflowMasks:
    """On the JAX backend, while active: the dropout layers of `model` (KerasReplay's; or of the models passed to
    `attach`) keep exactly the elements that the same layers keep on TensorFlow from the same seed state, and scale
    as TensorFlow does, so a JAX run and a TensorFlow run under KerasReplay's seeds differ only in float rounding.
    tests/on_jax/test_training_parity.py: 20 SGD steps with dropout on give TensorFlow's weights within 2e-6.

    Shapes: TensorFlow's blocks run the position-wise parts on the real tokens only ([T, H], RealTokens), JAX on
    [B, S, H]; there a block's output dropout draws the number of each real token's row in the [T, H] layout (rows
    at padding draw anything: nothing reads them). Everything else draws in the same shape on both, provided the
    batches are padded alike: JAX pads a batch to one of a few lengths (backends.pad_batch_lengths), TensorFlow to
    the batch's own, so this also pads JAX's batches as TensorFlow's (one compiled step per length). The last
    layer under a pooled head computes [CLS] only on both.

    Patched while active (the tool's, never in bert_keras' code paths outside it): Keras' JAX dropout,
    bert_keras.backends.padded_length (to the batch's own length) and RealTokens (to see each block's mask).
    """

    def __init__(self, model=None):
        self.generators, self.position_wise = set(), set()
        self.mask = None                 # the input mask of the block being traced
        if model is not None:
            self.attach(model)

    def attach(self, model) -> None:
        """Takes over `model`'s dropout layers (before its training step is traced: e.g. in a callback's
        on_train_begin, when the model is built inside the code under test)."""
        replay = KerasReplay(model)
        self.generators |= {id(layer.seed_generator) for layer, _, _ in replay.layers}
        self.position_wise |= {id(block.output_dropout.seed_generator) for block in model.encoder.transformer_layers}

    def __enter__(self):
        import keras
        from keras.src.backend import random as backend_random

        from bert_keras import backends, layers
        if keras.backend.backend() != "jax":
            raise RuntimeError("JaxDrawsTensorflowMasks is for the JAX backend (on TensorFlow KerasReplay is all)")
        self._saved = [(backend_random, "dropout", backend_random.dropout),
                       (backends, "padded_length", backends.padded_length),
                       (layers.RealTokens, "__init__", layers.RealTokens.__init__)]
        original_dropout, original_tokens = backend_random.dropout, layers.RealTokens.__init__
        replay = self

        def dropout(inputs, rate, noise_shape=None, seed=None):
            if id(seed) not in replay.generators or noise_shape is not None or rate in (0.0, 1.0):
                return original_dropout(inputs, rate, noise_shape=noise_shape, seed=seed)
            return replay._dropout(inputs, rate, seed.next(), id(seed) in replay.position_wise)

        def real_tokens(tokens, input_mask):
            original_tokens(tokens, input_mask)
            replay.mask = input_mask

        backend_random.dropout = dropout
        backends.padded_length = lambda length, max_length: length
        layers.RealTokens.__init__ = real_tokens
        return self

    def __exit__(self, *exc):
        for owner, name, value in self._saved:
            setattr(owner, name, value)

    def _dropout(self, x, rate, state, position_wise):
        import jax.numpy as jnp
        if position_wise and x.ndim == 3:            # [B, S, H] here, [T, H] over the real tokens on TensorFlow
            real = jnp.reshape(self.mask, (-1,)) > 0
            row = jnp.maximum(jnp.cumsum(real.astype(jnp.int32)) - 1, 0)                       # [B * S]
            index = row[:, None] * x.shape[-1] + jnp.arange(x.shape[-1], dtype=jnp.int32)[None]
            index = jnp.reshape(index, x.shape)
        else:
            index = jnp.reshape(jnp.arange(x.size, dtype=jnp.int32), x.shape)
        keep = tensorflow_uniform_at(index, state) >= jnp.float32(rate)
        return jnp.where(keep, x * jnp.asarray(1.0 / (1.0 - rate), x.dtype), jnp.zeros_like(x))
