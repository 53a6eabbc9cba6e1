"""`bert-keras finetune --save-every N` killed with -9 at 3 random steps (one in each epoch, the first mid-epoch) and
run again each time: the last run ends with the weights (bit for bit) and the evaluation of the run never killed,
every rerun starts at the last saved step, and a kill loses at most N steps. A save that fails (a write error from
the kernel, as on a full disk) stops the run with one line, the previous point intact, and the rerun resumes there."""

import json
import random
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_keras  # noqa: F401  (registers the models for load_model)
from bert_keras_cli.main import main
from conftest import REPO
from synthetic_data import sst2_file

pytestmark = pytest.mark.integration          # whole runs of the command, killed with SIGKILL

# The command, with every finished training step printed to stderr ("step <n>", after the step's resume point,
# if one was due, is written): the test kills the process once it has seen the step it chose.
KILLABLE = """
import sys
from bert_keras.training import resume
original = resume.ResumeCheckpoint.on_train_batch_end
def on_train_batch_end(self, batch, logs=None):
    original(self, batch, logs)
    print(f"step {self.step}", file=sys.stderr, flush=True)
resume.ResumeCheckpoint.on_train_batch_end = on_train_batch_end
from bert_keras_cli.main import main
sys.exit(main(sys.argv[1:]))
"""
SAVE_EVERY, PER_EPOCH, EPOCHS = 5, 12, 3          # 96 examples in batches of 8


def run_until(argv, step):
    """Runs `argv` (finetune's flags) in a new process and kills it with SIGKILL once it has finished `step`
    training steps (or lets it end); returns (the last step it printed, its stdout)."""
    process = subprocess.Popen([sys.executable, "-c", KILLABLE, *argv], cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    last = 0
    for line in process.stderr:
        if line.startswith("step "):
            last = int(line.split()[1])
            if step is not None and last >= step:
                process.send_signal(signal.SIGKILL)
                break
    stdout, stderr = process.communicate(timeout=300)
    last = max([last] + [int(l.split()[1]) for l in stderr.splitlines() if l.startswith("step ")])
    if step is None:
        assert process.returncode == 0, stderr[-3000:]
    else:
        assert process.returncode == -signal.SIGKILL, stderr[-3000:]
    return last, stdout


def test_killed_three_times_resumes_to_the_uninterrupted_weights(minilm_vocab, tmp_path, capsys):
    train = sst2_file(tmp_path / "train.tsv", 96)

    def flags(out):
        return ["finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab, "--train", str(train),
                "--eval", str(train), "--epochs", str(EPOCHS), "--batch-size", "8", "--learning-rate", "1e-3",
                "--max-seq-length", "32", "--save-every", str(SAVE_EVERY), "--quiet", "--out", str(out)]
    assert main(flags(tmp_path / "whole")) == 0                  # the run never killed (in this process)
    capsys.readouterr()
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    # One kill in each epoch; the first between two points of epoch 1 (its last point is mid-epoch: step 5 or 10).
    kills = [rng.randint(6, 11), rng.randint(PER_EPOCH + 1, 2 * PER_EPOCH - 1),
             rng.randint(2 * PER_EPOCH + 1, 3 * PER_EPOCH - 1)]
    killed, state, resumed_at = tmp_path / "killed", tmp_path / "killed" / "backup" / "state.json", 0
    for at in kills:
        last, printed = run_until(flags(killed), at)
        if resumed_at:
            assert f"resumed at step {resumed_at}" in printed or f"resumed after epoch {resumed_at // PER_EPOCH} " \
                in printed, (seed, printed)
        point = json.loads(state.read_text())
        assert last >= at and last - point["step"] <= SAVE_EVERY, (seed, kills, last, point["step"])
        assert point["step"] == point["epoch"] * PER_EPOCH + point["batch"]
        resumed_at = point["step"]
        if at == kills[0]:
            assert point["batch"] > 0 and point["epoch"] == 0, (seed, point)     # a point within the epoch
    assert not (killed / "model.keras").exists()
    _, printed = run_until(flags(killed), None)
    assert f"resumed at step {resumed_at}" in printed or f"resumed after epoch {resumed_at // PER_EPOCH} " in printed
    ours, theirs = (json.loads((run / "metrics.json").read_text()) for run in (tmp_path / "whole", killed))
    assert theirs["history"] == ours["history"] and len(ours["history"]) == EPOCHS, seed
    assert theirs["steps"] == ours["steps"] == EPOCHS * PER_EPOCH
    a, b = (keras.models.load_model(run / "model.keras").get_weights() for run in (tmp_path / "whole", killed))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y, err_msg=f"random seed {seed}, kills {kills}")
    assert not (killed / "backup").exists()


# The command, with the files it may write limited to 1 MiB from its second resume point on: the kernel fails the
# weights' write (EFBIG, where a full disk gives ENOSPC) under HDF5's own C writes.
FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # the write fails with an error instead of killing the process
from bert_keras.training import resume
original = resume.save_resume_point
def save_resume_point(model, folder, n, record):
    if n > 5:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
    original(model, folder, n, record)
resume.save_resume_point = save_resume_point
from bert_keras_cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_save_that_fails_stops_the_run_and_keeps_the_previous_point(minilm_vocab, tmp_path, capsys):
    train = sst2_file(tmp_path / "train.tsv", 96)
    out = tmp_path / "run"
    flags = ["finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab, "--train", str(train),
             "--epochs", "2", "--batch-size", "8", "--learning-rate", "1e-3", "--max-seq-length", "32",
             "--save-every", "5", "--quiet", "--out", str(out)]
    run = subprocess.run([sys.executable, "-c", FULL_DISK, *flags], cwd=REPO, capture_output=True, text=True,
                         env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    error = run.stderr.strip().splitlines()[-1]
    assert error.startswith(f"bert-keras finetune: error: could not save the resume point at 10 in {out}"), error
    assert "(File too large); the point at 5 is kept: run the same command again to resume there" in error
    # The point of step 5 whole, nothing of the failed one left beside it.
    assert sorted(p.name for p in (out / "backup").iterdir()) == ["state.json", "weights-5.weights.h5"]
    assert json.loads((out / "backup" / "state.json").read_text())["step"] == 5
    capsys.readouterr()
    assert main(flags) == 0
    assert "resumed at step 5: batch 5 of 12 in epoch 1" in capsys.readouterr().out
    assert (out / "model.keras").exists() and not (out / "backup").exists()
