"""BERT's optimizer recipe on Keras' own optimizers (no hand-written update rules).

google-research/bert `optimization.py`: learning rate rises linearly from 0 to the peak over the warm-up steps,
then follows `peak * (1 - step / total_steps)` (polynomial decay, power 1, to 0 at the last step); Adam with
decoupled weight decay 0.01 applied to every weight except LayerNorm parameters and biases; epsilon 1e-6;
gradients clipped to global norm 1.0. LAMB (`keras.optimizers.Lamb`) takes the same schedule for large batches.

AdamW is Keras' AdamW with one change, where epsilon goes: Keras adds it to sqrt(v) before bias correction,
i.e. it divides by sqrt(v_hat) + epsilon / sqrt(1 - beta_2^t) (31.6x epsilon at step 1); PyTorch/HF AdamW add
it to sqrt(v_hat). With clipping to norm 1 most gradients are small enough for Keras' placement to shrink their
updates, so this follows PyTorch's, as the recipe's published results do (docs/accuracy.md).
"""

from __future__ import annotations

import keras
from keras import ops

from bert_keras.backends import on_tensorflow

# Keras variable names (the last path component): LayerNorm's gamma/beta and every bias skip weight decay.
NO_DECAY = ["gamma", "beta", "bias"]


SCHEDULES = ("google", "linear")


@keras.saving.register_keras_serializable(package="bert_keras")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak` over `warmup_steps`, then linear decay to 0 at `total_steps`.

    Two decay rules, which differ only after the warm-up:
      "google"  google-research/bert optimization.py: peak * max(0, 1 - step / total_steps), so the rate right
                after warm-up is already peak * (1 - warmup / total) (0.9 * peak with 10% warm-up).
      "linear"  transformers' get_linear_schedule_with_warmup: peak * max(0, (total - step) / (total - warmup)),
                which decays from the peak itself.
    Step 0 (the first update) gets rate 0 under both when there is a warm-up, as in both references.

    Args:
        peak: float. The learning rate at the end of the warm-up.
        warmup_steps: int. Steps of linear warm-up, in [0, total_steps].
        total_steps: int. The step at which the rate reaches 0.
        schedule: str. "google" or "linear" (see above).

    Example:
        >>> [round(float(WarmupLinearDecay(1.0, 10, 100, schedule=s)(10)), 4) for s in ("google", "linear")]
        [0.9, 1.0]
    """

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, schedule: str = "google"):
        if total_steps <= 0 or warmup_steps < 0 or warmup_steps > total_steps:
            raise ValueError(f"need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps}), total > 0")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES} (--schedule), got {schedule!r}")
        self.peak, self.warmup_steps, self.total_steps = float(peak), int(warmup_steps), int(total_steps)
        self.schedule = schedule

    def __call__(self, step):
        step = ops.cast(step, "float32")
        if self.schedule == "google":
            decayed = self.peak * ops.maximum(0.0, 1.0 - step / float(self.total_steps))
        else:
            span = float(max(1, self.total_steps - self.warmup_steps))
            decayed = self.peak * ops.maximum(0.0, (float(self.total_steps) - step) / span)
        if self.warmup_steps == 0:
            return decayed
        warm = self.peak * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warm, decayed)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps,
                "schedule": self.schedule}


@keras.saving.register_keras_serializable(package="bert_keras")
class BertAdamW(keras.optimizers.AdamW):
    """keras.optimizers.AdamW (decoupled weight decay, Keras' variable handling) with the update
    lr * m_hat / (sqrt(v_hat) + epsilon), as PyTorch's AdamW. No AMSGrad."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("BertAdamW does not implement amsgrad")

    def _clip_gradients(self, grads):
        """Keras' clipping, each sparse gradient (an embedding table's tf.IndexedSlices) made dense once first:
        global-norm clipping reads it twice (its squares for the norm, its product with the scale) and each read
        scattered the rows into a dense [V, H] table again, one UnsortedSegmentSum over MiniLM's 11.7M-weight
        table each (profiled, 2026-11-29). The same values either way; update_step takes it dense anyway."""
        if on_tensorflow() and self.global_clipnorm:
            import tensorflow as tf
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        return super()._clip_gradients(grads)

    def update_step(self, gradient, variable, learning_rate):
        """One fused kernel per variable (TF's ApplyAdam, as Keras 2 and tf.compat.v1 Adam ran): it computes
        var -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps'), which with eps' = eps * sqrt(1 - b2^t)
        is exactly lr * m_hat / (sqrt(v_hat) + eps). One pass over the weights instead of a dozen element-wise
        ops, which on CPU are a visible share of a fine-tuning step (docs/performance.md). On JAX and PyTorch the
        same update in keras.ops (XLA fuses it there)."""
        import tensorflow as tf
        dtype = variable.dtype
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        beta_1_power, beta_2_power = ops.power(beta_1, step), ops.power(beta_2, step)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        if not on_tensorflow():
            gradient = ops.cast(gradient, dtype)
            self.assign_add(m, (gradient - m) * (1 - beta_1))
            self.assign_add(v, (ops.square(gradient) - v) * (1 - beta_2))
            rate = ops.cast(learning_rate, dtype) * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
            epsilon = ops.cast(self.epsilon, dtype) * ops.sqrt(1 - beta_2_power)
            self.assign_sub(variable, rate * m / (ops.sqrt(v) + epsilon))
            return
        gradient = tf.convert_to_tensor(gradient, dtype)         # dense, as PyTorch's AdamW (embeddings too)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(m), v=_handle(v), beta1_power=beta_1_power,
            beta2_power=beta_2_power, lr=ops.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
            epsilon=ops.cast(self.epsilon, dtype) * ops.sqrt(1.0 - beta_2_power), grad=gradient)


def _handle(variable):
    """The resource handle of a Keras or tf.Variable (the local copy under a distribution strategy)."""
    if isinstance(variable, keras.Variable):
        variable = variable.value                                 # the backend's tf.Variable
    return variable.handle


def create_optimizer(learning_rate: float, total_steps: int, warmup_steps: int | None = None,
                     warmup_proportion: float = 0.1, weight_decay: float = 0.01, optimizer: str = "adamw",
                     clipnorm: float | None = 1.0, schedule: str = "google",
                     epsilon: float = 1e-6) -> keras.optimizers.Optimizer:
    """AdamW (fine-tuning, pretraining) or LAMB (large-batch pretraining) with BERT's schedule and decay rule.

    google-research/bert's optimization.py on Keras' optimizers: linear warm-up to `learning_rate`, linear decay
    to 0 at `total_steps` (google-research's rule, or transformers' with schedule="linear"), decoupled weight
    decay except on LayerNorm parameters and biases, epsilon 1e-6, global-norm clipping. The schedule is serializable, so a saved model's optimizer state reloads.

    Args:
        learning_rate: float. The peak learning rate (2e-5 ~ 5e-5 fine-tuning BERT-Base, 1e-4 pretraining).
        total_steps: int. Training steps; the rate reaches 0 at the last one.
        warmup_steps: int or None. Warm-up steps; None takes `warmup_proportion` of `total_steps`.
        warmup_proportion: float. Used when `warmup_steps` is None (0.1, as run_classifier.py).
        weight_decay: float. Decoupled weight decay rate.
        optimizer: str. "adamw" or "lamb".
        clipnorm: float or None. Global gradient-norm clip; None for no clipping.
        schedule: str. The decay after warm-up: "google" (google-research/bert) or "linear" (transformers'
            get_linear_schedule_with_warmup); see WarmupLinearDecay.
        epsilon: float. Adam's epsilon, added to sqrt(v_hat) (1e-6 in google-research/bert, 1e-8 in
            transformers).

    Returns:
        A keras.optimizers.Optimizer.

    Raises:
        ValueError: an unknown `optimizer`, or warm-up not within [0, total_steps].

    Example:
        >>> optimizer = bert_keras.training.create_optimizer(5e-5, total_steps=1000)    # 100 warm-up steps
        >>> type(optimizer).__name__, float(optimizer.learning_rate)                     # step 0: rate 0
        ('BertAdamW', 0.0)
        >>> schedule = bert_keras.training.WarmupLinearDecay(5e-5, warmup_steps=100, total_steps=1000)
        >>> [round(float(schedule(step)), 8) for step in (0, 50, 100, 1000)]
        [0.0, 2.5e-05, 4.5e-05, 0.0]
    """
    if warmup_steps is None:
        warmup_steps = int(total_steps * warmup_proportion)
    rate = WarmupLinearDecay(learning_rate, warmup_steps, total_steps, schedule=schedule)
    common = dict(learning_rate=rate, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=epsilon,
                  global_clipnorm=clipnorm)
    if optimizer == "adamw":
        opt = BertAdamW(**common)
    elif optimizer == "lamb":
        opt = keras.optimizers.Lamb(**common)
    else:
        raise ValueError(f"optimizer must be 'adamw' or 'lamb', got {optimizer!r}")
    opt.exclude_from_weight_decay(var_names=NO_DECAY)
    return opt
