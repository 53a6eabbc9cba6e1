"""Keras callbacks the trainers share: the official metric after every epoch, the time each epoch takes, a PNG of
the training curves, and TensorBoard logs at the run's global step (a resumed run continues its killed run's curve)."""

from __future__ import annotations

import os
import time

import keras

from bert_keras import storage
from bert_keras.atomic import atomic_file


class EpochEvaluation(keras.callbacks.Callback):
    """The task's official metric on the evaluation set after every epoch, into the epoch's logs (as `eval_<name>`,
    so TensorBoard and the curves see it when they come after this callback) and into `history`.

    Args:
        task: a fine-tuning task kind (bert_keras.finetune.get_task), which scores a model on `examples`.
        examples: the evaluation examples, as `task.read` returns them.
        batch_size: the prediction batch size.
        out: the run folder (SQuAD writes predictions.json there after each evaluation).

    `history` holds one dict per epoch ({"epoch": n, **scores}) and `seconds` the time each evaluation took.

    Example:
        >>> evaluation = EpochEvaluation(task, dev_examples, batch_size=64, out="run")   # doctest: +SKIP
        >>> model.fit(data, epochs=2, callbacks=[evaluation])                          # doctest: +SKIP
    """

    def __init__(self, task, examples, batch_size: int, out: str):
        super().__init__()
        self.task, self.examples = task, examples
        self.batch_size, self.out = batch_size, out
        self.history, self.seconds = [], []

    def on_epoch_end(self, epoch, logs=None):
        start = time.perf_counter()
        scores = self.task.evaluate(self.model, self.examples, self.batch_size)
        self.history.append({"epoch": epoch + 1, **scores})
        if hasattr(self.task, "write_predictions"):             # SQuAD: predictions.json for the official script
            self.task.write_predictions(self.out)
        self.seconds.append(time.perf_counter() - start)
        if logs is not None:
            logs.update({f"eval_{k}": v for k, v in scores.items() if isinstance(v, (int, float))})
        print(f"epoch {epoch + 1}: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()
                                                 if isinstance(v, float)), flush=True)


class EpochTimer(keras.callbacks.Callback):
    """Wall time of each epoch's training steps: from the epoch's start to its end, before the callbacks after
    this one (put it first: an evaluation after it is not counted). `seconds` holds one value per epoch.

    Example:
        >>> timer = EpochTimer()
        >>> timer.seconds
        []
    """

    def __init__(self):
        super().__init__()
        self.seconds, self._start = [], None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if self._start is not None:
            self.seconds.append(time.perf_counter() - self._start)
            self._start = None


def optimizer_step(model) -> int:
    """The optimizer's step count of `model` (its `iterations`): where a resumed run goes on from. Read it when
    `fit` starts: on JAX the variables lag behind the steps while `fit` runs."""
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def last_logged_step(folder: str, prefix: str = "batch_") -> int:
    """The highest step of the scalars named `prefix...` in the TensorBoard event files in `folder` (0 if none):
    the batch summaries a killed run wrote, which its resumed run must not write again. A record cut off by the
    kill ends its file's reading (the points before it count).

    Example:
        >>> last_logged_step("no_such_run/logs/train")
        0
    """
    import tensorflow as tf
    if not storage.isdir(folder):
        return 0
    last = 0
    for name in storage.listdir(folder):
        if not name.startswith("events.out.tfevents."):
            continue
        try:
            for record in tf.data.TFRecordDataset(os.path.join(folder, name)).as_numpy_iterator():
                event = tf.compat.v1.Event.FromString(record)
                if event.step > last and any(v.tag.startswith(prefix) for v in event.summary.value):
                    last = event.step
        except tf.errors.DataLossError:           # the last record of a killed writer, cut off
            pass
    return last


class StepCount:
    """The run's global step at each batch, counted from the optimizer's step when `fit` starts (a resumed run's
    saved step): the step a batch ends at is the count when its epoch began plus the batch's index in `fit`'s
    epoch + 1, which holds with steps_per_execution > 1 and on JAX, where reading the optimizer's variable each
    batch would lag."""

    def __init__(self):
        self.step, self._epoch_start = 0, 0

    def start(self, model) -> int:
        self.step = self._epoch_start = optimizer_step(model)
        return self.step

    def epoch(self) -> None:
        self._epoch_start = self.step

    def batch(self, batch: int) -> int:
        self.step = self._epoch_start + batch + 1
        return self.step


class TensorBoard(keras.callbacks.TensorBoard):
    """keras.callbacks.TensorBoard on the run's global step, continued by a resumed run, and safe from a kill.

    Keras' own counts the batches of each `fit` call from 0: a run killed at step 91 and resumed logged its steps
    92-120 as 10 and 20, over the first run's curve. Here each batch's summaries are written at the optimizer's
    step (StepCount); the steps the folder's event files already hold (a killed run logged them after its last
    resume point, from the same batches) are not written again, so the runs draw one curve without a repeated step;
    and the writer is flushed at each logged step and epoch, so a kill loses none of them (a writer flushes every
    2 minutes otherwise). It also records every epoch's logs: Keras' own leaves its batch-level
    `record_if(step % update_freq == 0)` in force when the epoch ends, so with an integer `update_freq` an epoch
    whose last step is not a multiple of it records nothing (tensorflow/tensorflow#49109, open).

    Example:
        >>> board = TensorBoard("run/logs", update_freq=10)
        >>> board.update_freq
        10
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._count, self._logged_until = StepCount(), 0

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._global_train_batch = self._count.start(self.model)
        self._logged_until = last_logged_step(self._train_dir) if self._global_train_batch else 0

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        self._count.epoch()

    def on_train_batch_end(self, batch, logs=None):
        step = self._count.batch(batch)
        if step != self._global_train_batch:      # (steps_per_execution > 1: Keras counted one a call)
            self._global_train_batch = step
            if self.update_freq != "epoch":
                self._pop_writer()
                self._push_writer(self._train_writer, step)
        new = step > self._logged_until
        super().on_train_batch_end(batch, logs if new else None)
        if new and self.update_freq != "epoch" and step % self.update_freq == 0:
            self._train_writer.flush()

    def on_epoch_end(self, epoch, logs=None):
        import tensorflow as tf
        with tf.summary.record_if(True):
            super().on_epoch_end(epoch, logs)
        self._train_writer.flush()


class LearningRateLog(keras.callbacks.Callback):
    """The optimizer's learning rate every `every` steps, as the TensorBoard scalar `batch_learning_rate` in
    `logdir` (beside Keras' `batch_loss`), at the run's global step (StepCount: a resumed run goes on from its
    step, and steps its killed run logged already are not written again), flushed at once (a kill loses none).
    The step's logs are left as they are (Keras reads the epoch's metrics from them when their keys are its own).

    Args:
        logdir: the folder for the event file (the TensorBoard callback's `<log_dir>/train`).
        every: the interval in steps.

    Example:
        >>> model.fit(data, callbacks=[LearningRateLog("logs/train", every=10)])       # doctest: +SKIP
    """

    def __init__(self, logdir: str, every: int = 10):
        super().__init__()
        self.logdir, self.every, self._writer, self._logged = logdir, every, None, 0
        self._count = StepCount()

    def on_train_begin(self, logs=None):
        step = self._count.start(self.model)
        self._logged = max(step, last_logged_step(self.logdir, "batch_learning_rate") if step else 0) // self.every

    def on_epoch_begin(self, epoch, logs=None):
        self._count.epoch()

    def on_train_batch_end(self, batch, logs=None):
        import tensorflow as tf
        step = self._count.batch(batch)
        if step // self.every <= self._logged:     # (steps_per_execution > 1 may step over the multiple itself)
            return
        self._logged = step // self.every
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        with self._writer.as_default():
            tf.summary.scalar("batch_learning_rate", rate, step=step)
        self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class TrainingCurves(keras.callbacks.Callback):
    """Loss per step and a metric per epoch, drawn to a PNG after every epoch.

    Args:
        path: the PNG to write (atomically).
        metric: the per-epoch metric to draw: `eval_<metric>` when an EpochEvaluation before this callback put
            it in the logs, else the training log `<metric>` (pretraining's mlm_accuracy); None draws the loss only.

    Example:
        >>> curves = TrainingCurves("run/training_curves.png", "accuracy")
        >>> curves.metric
        'accuracy'
    """

    def __init__(self, path: str, metric: str | None = None):
        super().__init__()
        self.path, self.metric, self.losses, self.epochs = path, metric, [], []
        self.step, self._count = 0, StepCount()

    def on_train_begin(self, logs=None):
        self.step = self._count.start(self.model)      # a resumed run draws at its own steps

    def on_epoch_begin(self, epoch, logs=None):
        self._count.epoch()

    def on_train_batch_end(self, batch, logs=None):
        self.step = self._count.batch(batch)
        if logs and "loss" in logs:
            self.losses.append((self.step, float(logs["loss"])))

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(f"eval_{self.metric}", (logs or {}).get(self.metric)) if self.metric else None
        if value is not None:                       # the evaluation metric, else the training one (pretraining)
            self.epochs.append((self.step, float(value)))
        self.draw()

    def draw(self):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        if self.losses:
            ax.plot(*zip(*self.losses), color="tab:blue", lw=1)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (running mean)", color="tab:blue")
        if self.epochs:
            right = ax.twinx()
            right.plot(*zip(*self.epochs), "o-", color="tab:red")
            right.set_ylabel(self.metric, color="tab:red")
        fig.tight_layout()
        with atomic_file(self.path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)
