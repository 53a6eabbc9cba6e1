"""The trainers' `fit` (training/setup.py) prints a progress bar to a terminal only: a log file gets one plain line
an epoch, and the summary line a callback prints at the epoch's end (EpochEvaluation's) starts its own line in
both. Keras' own bar takes any POSIX stdout for a terminal (keras.utils.Progbar), so it wrote ANSI colours, "\\b"
and "\\r" into log files; and its logger ran after our callbacks, so a summary line was glued onto the bar
("...loss: 0.6926epoch 1: accuracy 0.5768"). On a tiny Dense model: the lines, not the model, are under test."""

import contextlib
import io
import re
import types

import keras
import numpy as np
import tensorflow as tf

from bert_keras.training.callbacks import EpochEvaluation
from bert_keras.training.setup import fit


class ScoredTask:
    """A task kind whose evaluation scores 0.5: EpochEvaluation prints "epoch <n>: accuracy 0.5000"."""

    def evaluate(self, model, examples, batch_size):
        return {"accuracy": 0.5}


class Terminal(io.StringIO):
    def isatty(self):
        return True


def train(stdout, tmp_path) -> str:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensor_slices((np.ones((12, 3), "float32"), np.ones((12, 1), "float32")))
    with contextlib.redirect_stdout(stdout):
        fit(model, data.batch(4).repeat(), types.SimpleNamespace(progress=True), epochs=2, steps_per_epoch=3,
            callbacks=[EpochEvaluation(ScoredTask(), [], 4, str(tmp_path))])
    return stdout.getvalue() if isinstance(stdout, io.StringIO) else None


def test_a_log_file_gets_one_plain_line_an_epoch(tmp_path):
    with open(tmp_path / "log.txt", "w") as log:
        train(log, tmp_path)
    text = (tmp_path / "log.txt").read_text()
    assert not {"\x1b", "\r", "\b"} & set(text), repr(text)
    lines = text.splitlines()
    assert len(lines) == 6, lines
    for epoch in (1, 2):
        heading, bar, summary = lines[3 * epoch - 3:3 * epoch]
        assert heading == f"Epoch {epoch}/2"
        assert re.fullmatch(r"3/3 - \d+s - \d+m?s/step - loss: \d\.\d{4}", bar), bar
        assert summary == f"epoch {epoch}: accuracy 0.5000"


def test_a_terminal_gets_the_bar_and_the_summary_on_a_line_of_its_own(tmp_path):
    text = train(Terminal(), tmp_path)
    assert "\x1b[" in text and "\r" in text                     # the live bar stays where it can redraw itself
    for epoch in (1, 2):
        assert f"\nepoch {epoch}: accuracy 0.5000\n" in text, repr(text)
