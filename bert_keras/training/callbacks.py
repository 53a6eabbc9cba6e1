"""Keras callbacks the trainers share: the official metric after every epoch, the time each epoch takes, and a
PNG of the training curves."""

from __future__ import annotations

import time

import keras

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


class TensorBoard(keras.callbacks.TensorBoard):
    """keras.callbacks.TensorBoard that records every epoch's logs. Keras' own leaves its batch-level
    `record_if(step % update_freq == 0)` in force when the epoch ends, so with an integer `update_freq` an epoch
    whose last step is not a multiple of it records nothing (tensorflow/tensorflow#49109, open).

    Example:
        >>> board = TensorBoard("run/logs", update_freq=10)
        >>> board.update_freq
        10
    """

    def on_epoch_end(self, epoch, logs=None):
        import tensorflow as tf
        with tf.summary.record_if(True):
            super().on_epoch_end(epoch, logs)


class LearningRateLog(keras.callbacks.Callback):
    """The optimizer's learning rate every `every` steps, as the TensorBoard scalar `batch_learning_rate` in
    `logdir` (beside Keras' `batch_loss`), at the optimizer's step count. The step's logs are left as they are
    (Keras reads the epoch's metrics from them when their keys are its own).

    Args:
        logdir: the folder for the event file (the TensorBoard callback's `<log_dir>/train`).
        every: the interval in steps.

    Example:
        >>> model.fit(data, callbacks=[LearningRateLog("logs/train", every=10)])       # doctest: +SKIP
    """

    def __init__(self, logdir: str, every: int = 10):
        super().__init__()
        self.logdir, self.every, self._writer, self._logged = logdir, every, None, 0

    def _step(self) -> int:
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_begin(self, logs=None):
        self._logged = self._step() // self.every           # a resumed run goes on from its step

    def on_train_batch_end(self, batch, logs=None):
        import tensorflow as tf
        step = self._step()
        if step // self.every <= self._logged:     # (steps_per_execution > 1 may step over the multiple itself)
            return
        self._logged = step // self.every
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        with self._writer.as_default():
            tf.summary.scalar("batch_learning_rate", rate, step=step)

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
        self.step = 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
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
