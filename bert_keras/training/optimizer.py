"""BERT's optimizer recipe on Keras' own optimizers (no hand-written update rules).

google-research/bert `optimization.py`: learning rate rises linearly from 0 to the peak over the warm-up steps,
then follows `peak * (1 - step / total_steps)` (polynomial decay, power 1, to 0 at the last step); Adam with
decoupled weight decay 0.01 applied to every weight except LayerNorm parameters and biases; epsilon 1e-6;
gradients clipped to global norm 1.0. LAMB (`keras.optimizers.Lamb`) takes the same schedule for large batches.
"""

from __future__ import annotations

import keras
from keras import ops

# Keras variable names (the last path component): LayerNorm's gamma/beta and every bias skip weight decay.
NO_DECAY = ["gamma", "beta", "bias"]


@keras.saving.register_keras_serializable(package="bert_keras")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """step -> peak * step / warmup_steps while step < warmup_steps, else peak * max(0, 1 - step / total_steps)."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        if total_steps <= 0 or warmup_steps < 0 or warmup_steps > total_steps:
            raise ValueError(f"need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps}), total > 0")
        self.peak, self.warmup_steps, self.total_steps = float(peak), int(warmup_steps), int(total_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decayed = self.peak * ops.maximum(0.0, 1.0 - step / float(self.total_steps))
        if self.warmup_steps == 0:
            return decayed
        warm = self.peak * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warm, decayed)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


def create_optimizer(learning_rate: float, total_steps: int, warmup_steps: int | None = None,
                     warmup_proportion: float = 0.1, weight_decay: float = 0.01, optimizer: str = "adamw",
                     clipnorm: float | None = 1.0) -> keras.optimizers.Optimizer:
    """AdamW (fine-tuning, pretraining) or LAMB (large-batch pretraining) with BERT's schedule and decay rule."""
    if warmup_steps is None:
        warmup_steps = int(total_steps * warmup_proportion)
    schedule = WarmupLinearDecay(learning_rate, warmup_steps, total_steps)
    common = dict(learning_rate=schedule, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                  global_clipnorm=clipnorm)
    if optimizer == "adamw":
        opt = keras.optimizers.AdamW(**common)
    elif optimizer == "lamb":
        opt = keras.optimizers.Lamb(**common)
    else:
        raise ValueError(f"optimizer must be 'adamw' or 'lamb', got {optimizer!r}")
    opt.exclude_from_weight_decay(var_names=NO_DECAY)
    return opt
