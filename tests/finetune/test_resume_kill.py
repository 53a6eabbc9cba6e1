"""`bert-keras finetune --save-every N` killed with -9 at 3 random steps (one in each epoch, the first mid-epoch) and
run again each time: the last run ends with the weights (bit for bit) and the evaluation of the run never killed,
every rerun starts at the last saved step, and a kill loses at most N steps."""

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
