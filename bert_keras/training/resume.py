"""Where a killed training run starts again: its weights with the optimizer's state, and a small JSON record
(the step or epoch reached, and whatever the trainer needs to go on as if never stopped), committed together.

A resume point is a folder holding `state.json` and the weights file it names (`weights-<n>.weights.h5`). The
weights are written under their new name first and `state.json` is replaced last, by a rename: a kill at any
moment leaves the previous complete point, never new weights beside an old step (Keras' BackupAndRestore writes
its weights, then its epoch, in place). Weights files that state.json no longer names are removed after it.

    save_resume_point(model, "run/backup", 3, {"epoch": 3})
    record = restore_resume_point(model, "run/backup")       # {"epoch": 3, "weights": ...} or None

The folder may be on a bucket (`gs://...`, storage.py): the weights go through tf.io.gfile under their new name
and state.json is uploaded and renamed into place, so the same holds there.

A run folder is one of three things when a run starts in it (`run_folder`): new (the run creates it, and removes
it again if it fails before writing a resume point: a refused run leaves nothing behind), unfinished (a resume
point, no final result, or a kill before the first point: the run resumes or starts there, as before), or finished
(its final result written, the resume point removed or complete): refused unless `overwrite`, which deletes the
previous run's outputs first.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

import keras

from bert_keras import storage
from bert_keras.atomic import write_json

STATE = "state.json"
OLD_WEIGHTS = "model.weights.h5"        # pretraining's checkpoint before resume points named their weights


def save_resume_point(model, folder: str, n: int, record: dict) -> None:
    """Saves `model`'s weights (the optimizer's variables included, as `model.save_weights` writes them) and
    `record` as resume point `n` (a step or epoch count; it names the weights file).

    Args:
        model: a compiled Keras model.
        folder: the resume folder (created if missing).
        n: the count the point is at.
        record: JSON-serialisable facts to restore with the weights.

    Raises:
        OSError: the point could not be written (a full disk, a write error): one line naming the point kept
            (the previous one, untouched; the new weights file removed).
    """
    import tensorflow as tf
    storage.makedirs(folder)
    name = f"weights-{n}.weights.h5"
    try:
        model.save_weights(os.path.join(folder, name), overwrite=True)
        write_json(os.path.join(folder, STATE), {**record, "weights": name}, indent=None)
    except (OSError, tf.errors.OpError) as e:    # a full disk or bucket, a quota, a write error: the previous
        previous = read_resume_point(folder) if storage.exists(os.path.join(folder, STATE)) else None  # is whole
        if previous is None or os.path.basename(previous["weights"]) != name:
            with contextlib.suppress(OSError):
                storage.remove(os.path.join(folder, name))
        reason = (os.strerror(e.errno) if getattr(e, "errno", None) else
                  str(getattr(e, "message", e)).splitlines()[0])
        kept = (f"the point at {previous.get('step', previous.get('epoch'))} is kept: run the same command again "
                "to resume there" if previous else "no earlier point: a rerun starts afresh")
        raise OSError(f"could not save the resume point at {n} in {folder} ({reason}); {kept}, once the disk "
                      "has room") from None
    for stale in storage.listdir(folder):
        if stale.endswith(".weights.h5") and stale != name:
            storage.remove(os.path.join(folder, stale))


def read_resume_point(folder: str) -> dict | None:
    """The record of the resume point in `folder` (with "weights": the weights file's path), or None if there is
    none. Reads no weights."""
    state = os.path.join(folder, STATE)
    if not storage.exists(state):
        return None
    with storage.open(state) as f:
        record = json.load(f)
    weights = os.path.join(folder, record.get("weights", OLD_WEIGHTS))
    if not storage.exists(weights):
        raise FileNotFoundError(f"{state} names {weights}, which is missing: the resume point is damaged; delete "
                                f"{folder} to start the run from the beginning")
    return {**record, "weights": weights}


def finished_run(out: str, result: str, resume_folder: str, done: int | None = None) -> bool:
    """Did a run finish in `out`? Its final `result` file (e.g. model.keras) is there and no resume point is left
    in `resume_folder`, or the point left is at `done` (a run that keeps its last point, as pretraining does).

    Example:
        >>> finished_run("no_such_run", "model.keras", "no_such_run/backup")
        False
    """
    if not storage.exists(os.path.join(out, result)):
        return False
    state = os.path.join(resume_folder, STATE)
    if not storage.exists(state):
        return True
    if done is None:
        return False
    try:
        with storage.open(state) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return False
    return max(int(record.get("step", 0)), int(record.get("epoch", 0))) >= done


@contextlib.contextmanager
def run_folder(out: str, resume_folder: str, result: str, outputs: tuple, overwrite: bool = False,
               done: int | None = None):
    """Checks `out` before a training run writes into it, and removes it again when the run that created it
    fails before its first resume point (a refused run leaves no folder behind).

    Args:
        out: the run folder.
        resume_folder: where the run keeps its resume point (inside `out`).
        result: the file a finished run has written last but one (`finished_run`).
        outputs: every file and folder name the run writes in `out` (what `overwrite` deletes).
        overwrite: start afresh in a finished (or unfinished) run's folder: its `outputs` are deleted first.
        done: the step or epoch count of a finished run's resume point, for runs that keep it (`finished_run`).

    Raises:
        FileExistsError: `out` is a file, or holds a finished run and `overwrite` is not set.

    Example:
        >>> with run_folder("run", "run/backup", "model.keras", ("model.keras", "backup")):   # doctest: +SKIP
        ...     train_into("run")
    """
    if storage.exists(out) and not storage.isdir(out):
        raise FileExistsError(f"--out {out} is a file: give a folder for the run (a new one, or a run to resume)")
    if overwrite:                             # (every process of a multi-process run may get here: no race fails)
        for name in outputs:
            path = os.path.join(out, name)
            if storage.isdir(path):
                storage.rmtree(path)
            else:
                storage.remove(path)
    elif finished_run(out, result, resume_folder, done):
        raise FileExistsError(f"--out {out} holds a finished run ({result}): give another --out, or --overwrite to "
                              "replace it (a killed run resumes by itself)")
    created = not storage.exists(out)
    try:
        yield
    except BaseException:
        if created and storage.isdir(out) and not storage.exists(os.path.join(resume_folder, STATE)):
            storage.rmtree(out)
        raise


def restore_resume_point(model, folder: str) -> dict | None:
    """Loads the resume point in `folder` into `model` (built, its optimizer built too) and returns its record,
    or None (and `model` untouched) when there is none."""
    record = read_resume_point(folder)
    if record is not None:
        model.load_weights(record["weights"])
    return record


def seed_generators(model) -> list:
    """Every dropout seed generator in `model`, in layer order (a layer's own in their order)."""
    return [g for layer in model._flatten_layers() for g in getattr(layer, "_seed_generators", [])]


def seed_states(model) -> list:
    """The state of every dropout seed generator in `model`, in layer order: what `model.save_weights` leaves out
    (Keras keeps no seed state in weights files), so a resumed run draws the masks it would have drawn."""
    import numpy as np
    return [np.asarray(g.state.value).tolist() for g in seed_generators(model)]


def set_seed_states(model, states: list) -> None:
    """Assigns `states` (from `seed_states` on the same architecture) to `model`'s seed generators."""
    generators = seed_generators(model)
    if len(generators) != len(states):
        raise ValueError(f"the resume point holds {len(states)} dropout seed states, the model has "
                         f"{len(generators)} generators: it was written by another model")
    for generator, state in zip(generators, states):
        generator.state.assign(state)


def metric_states(model) -> list:
    """The values of `model`'s metric variables (the running loss and the compiled metrics of the current epoch):
    a point saved mid-epoch keeps them, so the resumed epoch reports the mean over all its batches."""
    return [keras.ops.convert_to_numpy(v.value).tolist() for v in model.metrics_variables]


def set_metric_states(model, states: list) -> None:
    """Assigns `states` (from `metric_states` on the same compiled model) to `model`'s metric variables."""
    variables = model.metrics_variables
    if len(variables) != len(states):
        raise ValueError(f"the resume point holds {len(states)} metric values, the model has {len(variables)}: it "
                         "was compiled with other metrics")
    for variable, state in zip(variables, states):
        variable.assign(state)


class ResumeCheckpoint(keras.callbacks.Callback):
    """Resume points for `model.fit` runs that must survive a kill: after every epoch, and within an epoch every
    `save_every` steps and/or every `save_seconds` of training (whichever comes first). A point holds the weights
    and the optimizer's state (its step count, so the learning-rate schedule goes on), the dropout seeds, the step
    and the batch within the epoch, the epoch's running metrics so far, the loss of each finished epoch, and the
    records of the evaluation and the timer. Put it after the callbacks whose records it keeps.

    Saving reads the model and writes files only (no random draw, no change to the training state), so the weights
    at the end do not depend on when points were saved: a time-based trigger is as deterministic as a step count.

    Args:
        folder: the resume folder (`<run>/backup`).
        settings: what fixes the run's course (JSON-serialisable); a resume point written with other settings is
            refused, so a rerun with a changed recipe is not silently continued from another run's weights.
        evaluation: an EpochEvaluation whose `history` and `seconds` are kept, or None.
        timer: an EpochTimer whose `seconds` are kept, or None.
        steps_per_epoch: the `steps_per_epoch` given to `fit` (needed for points within an epoch).
        save_every: a point every this many steps (at multiples of it); None: none by step count.
        save_seconds: a point once this many seconds passed since the last one; None: none by time.

    `restore(model)` returns the number of whole epochs done (0 without a resume point) and sets `step`, the
    batches trained so far: fit from that epoch, with the input advanced past `step` batches; the first epoch
    then ends after the batches it had left. `losses` holds each epoch's mean training loss.

    Example:
        >>> checkpoint = ResumeCheckpoint("run/backup", {"seed": 0}, steps_per_epoch=100, save_every=20)
        >>> done = checkpoint.restore(model)                                        # doctest: +SKIP
        >>> data = make_dataset().repeat().skip(checkpoint.step)                     # doctest: +SKIP
        >>> model.fit(data, epochs=3, steps_per_epoch=100, initial_epoch=done,
        ...           callbacks=[checkpoint])                                       # doctest: +SKIP
    """

    def __init__(self, folder: str, settings: dict, evaluation=None, timer=None, steps_per_epoch: int | None = None,
                 save_every: int | None = None, save_seconds: float | None = None):
        super().__init__()
        self.folder, self.settings = folder, json.loads(json.dumps(settings))
        self.evaluation, self.timer = evaluation, timer
        self.steps_per_epoch, self.save_every, self.save_seconds = steps_per_epoch, save_every, save_seconds
        self.losses: list[float] = []
        self.step, self.batch = 0, 0          # batches trained in all, and in the current epoch
        self.saved: int | None = None        # the step of the last point written or restored (None: none yet)
        self._resumed = None                  # a point within an epoch: its running metrics and seconds
        self._offset, self._epoch, self._saved_step, self._saved_at, self._stopped = 0, 0, 0, 0.0, False

    def restore(self, model) -> int:
        record = read_resume_point(self.folder)
        if record is None:
            return 0
        if record["settings"] != self.settings:
            changed = sorted(k for k in set(self.settings) | set(record["settings"])
                             if self.settings.get(k) != record["settings"].get(k))
            raise ValueError(f"{self.folder} holds an unfinished run with other settings ({', '.join(changed)}): "
                             "rerun it with the same settings to resume, or delete that folder (or give another "
                             "--out) to start afresh")
        model.load_weights(record["weights"])
        set_seed_states(model, record["seeds"])
        self.losses = list(record["losses"])
        if self.evaluation is not None:
            self.evaluation.history, self.evaluation.seconds = list(record["history"]), list(record["eval_seconds"])
        if self.timer is not None:
            self.timer.seconds = list(record["train_seconds"])
        epoch = int(record["epoch"])
        self.step = int(record.get("step", epoch * (self.steps_per_epoch or 0)))    # (points of epochs only)
        self.batch, self._saved_step, self.saved = int(record.get("batch", 0)), self.step, self.step
        if self.batch:
            self._resumed = record
        return epoch

    def on_train_begin(self, logs=None):
        self._saved_at = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch, self._offset = epoch, 0
        if self._resumed is not None:         # the epoch a mid-epoch point is in: go on from its batch
            set_metric_states(self.model, self._resumed["metrics"])        # (fit has just reset them)
            if self.timer is not None and self.timer._start is not None:
                self.timer._start -= self._resumed.get("epoch_seconds", 0.0)
            self._offset, self._resumed = self.batch, None
        self.batch = self._offset

    def on_train_batch_end(self, batch, logs=None):
        done = self._offset + batch + 1            # (`batch`: the last step of the call, steps_per_execution > 1)
        self.step += done - self.batch
        self.batch = done
        if self.steps_per_epoch and done >= self.steps_per_epoch:
            if self._offset and not self.model.stop_training:   # a resumed epoch ends after the batches it had left
                self.model.stop_training = self._stopped = True
            return                                 # (the epoch's own point follows)
        due = ((self.save_every and self.step // self.save_every > self._saved_step // self.save_every)
               or (self.save_seconds is not None and time.monotonic() - self._saved_at >= self.save_seconds))
        if due:
            self._save(self._epoch, done)

    def on_epoch_end(self, epoch, logs=None):
        if self._stopped:                          # the resumed epoch is over, the run goes on
            self.model.stop_training = self._stopped = False
        self.losses.append(float((logs or {}).get("loss", float("nan"))))
        self._save(epoch + 1, 0)

    def _save(self, epoch: int, batch: int) -> None:
        """Resume point at `epoch` whole epochs and `batch` more (a point within an epoch keeps its metrics)."""
        if hasattr(self.model, "jax_state_sync"):  # JAX: fit keeps the state outside the variables between steps
            self.model.jax_state_sync()
        record = {"epoch": epoch, "batch": batch, "step": self.step, "settings": self.settings,
                  "seeds": seed_states(self.model), "losses": self.losses,
                  "history": self.evaluation.history if self.evaluation else [],
                  "eval_seconds": self.evaluation.seconds if self.evaluation else [],
                  "train_seconds": self.timer.seconds if self.timer else []}
        if batch:
            record["metrics"] = metric_states(self.model)
            start = getattr(self.timer, "_start", None)
            record["epoch_seconds"] = time.perf_counter() - start if start is not None else 0.0
        save_resume_point(self.model, self.folder, self.step, record)
        self._saved_step, self._saved_at, self.saved = self.step, time.monotonic(), self.step

    def interrupted(self, total_steps: int) -> str:
        """The line a run stopped by Ctrl-C prints: the step it reached and where the same command goes on.

        Args:
            total_steps: the run's number of training steps.

        Example:
            >>> ResumeCheckpoint("run/backup", {}).interrupted(120)
            'interrupted at step 0 of 120, before its first resume point: the same command starts it again'
        """
        if self.saved is None:
            return (f"interrupted at step {self.step} of {total_steps}, before its first resume point: the same "
                    "command starts it again")
        return (f"interrupted at step {self.step} of {total_steps}: run the same command again to resume from step "
                f"{self.saved} (saved in {self.folder})")

    def finish(self) -> None:
        """Removes the resume folder: call it once the run's results are saved."""
        storage.rmtree(self.folder)
