"""What a `bert-keras finetune` stopped mid-epoch by Ctrl-C and run again leaves in its logs, through the command's
own main() with stdout and stderr redirected to files (as `bert-keras finetune ... > log 2>&1` runs it):

- TensorBoard: one curve on the global step. Keras' callback counts each `fit` call's batches from 0, so the
  resumed run logged its steps 7-10 as 2 and 4, over the first run's points; and the first run logged step 8
  after its last resume point (6), which the resumed run, going on from 6, logged again.
- the stop says, in one line, that the same command resumes, and from which saved step;
- the log file holds plain lines: no progress bar's ANSI colours, "\\r" or "\\b".

Ten steps (40 examples in batches of 8, 2 epochs), a resume point every 3 steps, points logged every 2 steps; the
Ctrl-C comes after step 8 (its summaries written), the last point is step 6."""

import contextlib
import json

import pytest
import tensorflow as tf

from bert_keras.training.callbacks import TrainingCurves
from bert_keras_cli.main import main
from synthetic_data import sst2_file

STOP_AT, SAVED, STEPS, LOG_EVERY = 8, 6, 10, 2


@pytest.fixture(scope="module")
def runs(minilm_vocab, tmp_path_factory):
    """The run stopped at step STOP_AT, then the same command again: {"out", "stopped": (exit, stdout, stderr,
    the resume point's state.json), "resumed": (exit, stdout, stderr)}."""
    tmp = tmp_path_factory.mktemp("resumed_logs")
    train = sst2_file(tmp / "train.tsv", 40)
    out = tmp / "run"
    flags = ["finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab, "--train", str(train),
             "--epochs", "2", "--batch-size", "8", "--learning-rate", "1e-3",
             "--max-seq-length", "32", "--save-every", "3", "--log-every", str(LOG_EVERY), "--out", str(out)]

    def run(name):
        with open(tmp / f"{name}.out", "w") as stdout, open(tmp / f"{name}.err", "w") as stderr, \
                contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(flags)
        return code, (tmp / f"{name}.out").read_text(), (tmp / f"{name}.err").read_text()

    original = TrainingCurves.on_train_batch_end

    def ctrl_c_after(self, batch, logs=None):          # the last of finetune's callbacks: the step's logs are written
        original(self, batch, logs)
        if self.step == STOP_AT:
            raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainingCurves, "on_train_batch_end", ctrl_c_after)
        stopped = run("stopped")
    state = json.loads((out / "backup" / "state.json").read_text())
    return {"out": out, "stopped": (*stopped, state), "resumed": run("resumed")}


def scalar_steps(folder, tag) -> list:
    """The steps of `tag` in every event file in `folder`, file after file in the order they were written, read
    with TensorFlow's own reader."""
    found = []
    files = sorted(folder.glob("events.out.tfevents.*"), key=lambda p: next(iter(tf.compat.v1.train.summary_iterator(
        str(p)))).wall_time)
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == tag:
                    found.append((event.step, float(tf.make_ndarray(value.tensor))))
    return found


def test_the_resumed_runs_tensorboard_curve_continues_the_global_step(runs):
    assert runs["stopped"][0] == 130 and runs["resumed"][0] == 0, runs["stopped"][2] + runs["resumed"][2]
    logs = runs["out"] / "logs" / "train"
    loss = scalar_steps(logs, "batch_loss")
    # One curve: the first run's points 2-8 (8 after its last resume point), then the resumed run's 10, each once.
    assert [step for step, _ in loss] == list(range(LOG_EVERY, STEPS + 1, LOG_EVERY)), loss
    rates = dict(scalar_steps(logs, "batch_learning_rate"))
    # transformers' linear schedule by hand: warm-up int(0.1 * 10) = 1 step, then 1e-3 * (10 - step) / 9.
    assert rates == pytest.approx({s: 1e-3 * (STEPS - s) / 9 for s in range(LOG_EVERY, STEPS + 1, LOG_EVERY)})
    assert len(scalar_steps(logs, "batch_learning_rate")) == len(rates)          # each step once


def test_ctrl_c_says_that_the_same_command_resumes_and_from_which_step(runs):
    code, _, stderr, state = runs["stopped"]
    assert code == 130 and state["step"] == SAVED
    backup = runs["out"] / "backup"
    assert (f"interrupted at step {STOP_AT} of {STEPS}: run the same command again to resume from step {SAVED} "
            f"(saved in {backup})") in stderr.splitlines(), stderr
    assert f"resumed at step {SAVED}: batch 1 of 5 in epoch 2" in runs["resumed"][1]


def test_a_log_file_gets_plain_lines(runs):
    """Without --quiet, as a user runs it: Keras' bar (it takes any POSIX stdout for a terminal) wrote ANSI
    colours, "\\b" and "\\r" into the file (tests/training/test_progress.py: the summary lines, on a tiny model)."""
    for _, stdout, *_ in (runs["stopped"], runs["resumed"]):
        assert not {"\x1b", "\r", "\b"} & set(stdout), repr(stdout[:600])
    lines = runs["resumed"][1].splitlines()
    bars = [line for line in lines if line.startswith("5/5 - ")]
    assert len(bars) == 1 and " - loss: " in bars[0], lines             # one line for the resumed epoch
