"""What `bert-keras pretrain` prints while it trains: optimizer steps, not Keras epochs.

The trainer runs Keras' fit with one "epoch" per checkpoint interval (trainer.py), so Keras' own logger would say
"Epoch 4/15" for steps 301-400 of 1500. `StepProgress` takes its place (Keras adds no logger of its own beside
a ProgbarLogger in the callbacks) and counts steps: on a terminal a line that updates in place
("step 337/1500 - loss 7.1234 - 0:41 left"); at the end of each interval, and in a log file only then, one line:

    step 400/1500 (checkpoint 4 of 15): loss 7.1234 - mlm_accuracy 0.0512 - 2,345 real tokens/s (73.3 rows/s) - 12 s
"""

from __future__ import annotations

import sys
import time

import keras

# Logs shown in the interval's line in their own words (the rest: "name value").
_OWN_WORDS = ("seconds", "real_tokens_per_second")


class StepProgress(keras.callbacks.ProgbarLogger):
    """Progress of a pretraining run in optimizer steps ("step 400/1500"), one line per checkpoint interval.

    Args:
        steps_per_interval: int. Steps of one Keras epoch (the checkpoint interval, `save_every`).
        total_steps: int. The run's `train_steps`.

    Example:
        >>> model.fit(data, epochs=15, steps_per_epoch=100, callbacks=[StepProgress(100, 1500)])  # doctest: +SKIP
        step 100/1500 (checkpoint 1 of 15): loss 9.8765 - mlm_accuracy 0.0123 - 2,345 real tokens/s (73.3 rows/s) - 12 s
    """

    def __init__(self, steps_per_interval: int, total_steps: int):
        super().__init__()
        self.steps, self.total = steps_per_interval, total_steps
        self.live, self.epoch, self.start, self.shown, self.width = False, 0, 0.0, 0.0, 0

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.live = self.verbose == 1 and hasattr(sys.stdout, "isatty") and sys.stdout.isatty()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.start, self.shown = epoch, time.perf_counter(), 0.0

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if not self.live or now - self.shown < 0.2:
            return
        self.shown = now
        step = self.epoch * self.steps + batch + 1
        left = (now - self.start) / (batch + 1) * (self.total - step)
        loss = f" - loss {float(logs['loss']):.4f}" if logs and "loss" in logs else ""
        self._write(f"\rstep {step}/{self.total}{loss} - {_duration(left)} left", end="")

    def on_epoch_end(self, epoch, logs=None):
        if not self.verbose:
            return
        logs = logs or {}
        parts = [f"{name} {_number(value)}" for name, value in logs.items() if name not in _OWN_WORDS]
        if "real_tokens_per_second" in logs:
            rows = logs["real_tokens_per_second"] / max(logs.get("real_tokens_per_row", 0), 1e-9)
            parts.append(f"{logs['real_tokens_per_second']:,.0f} real tokens/s ({rows:.1f} rows/s)")
        parts.append(f"{logs.get('seconds', time.perf_counter() - self.start):.0f} s")
        step, intervals = (epoch + 1) * self.steps, self.total // self.steps
        line = f"step {step}/{self.total} (checkpoint {epoch + 1} of {intervals}): " + " - ".join(parts)
        self._write(("\r" if self.live else "") + line, end="\n")

    def _write(self, text: str, end: str) -> None:
        """A line, padded over what the live line showed before it."""
        width = len(text.lstrip("\r"))
        sys.stdout.write(text + " " * max(0, self.width - width) + end)
        sys.stdout.flush()
        self.width = 0 if end else width

    # fit here has no validation data, and nothing else calls this logger
    def on_test_begin(self, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass


def _number(value) -> str:
    value = float(value)
    return f"{value:.4f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return f"{seconds // 60}:{seconds % 60:02d}"
