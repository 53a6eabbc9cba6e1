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
