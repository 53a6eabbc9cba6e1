"""An export is readable by a TF Serving process running as another user (a non-root container, a Kubernetes
securityContext): temporary files and folders renamed into place get the modes the umask gives a plain write,
not tempfile's owner-only ones."""

import os
import stat
import subprocess
import tempfile

import keras
import pytest

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.tasks import BertClassifier
from savedmodels.export import export_for_serving


def _modes(base: str) -> dict:
    out = {}
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, base)] = stat.S_IMODE(os.stat(path).st_mode)
    return out


@pytest.fixture(scope="module")
def model(minilm_vocab):
    keras.utils.set_random_seed(0)
    return BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, label_names=["neg", "pos"],
                          preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=32))


def _assert_modes(modes: dict, file_mode: int, folder_mode: int) -> None:
    for name in ("models.config", "batching_parameters.txt", "sst2/model.keras", "sst2/1/saved_model.pb",
                 "sst2/1/assets.extra/tf_serving_warmup_requests"):
        assert modes[name] == file_mode, (name, oct(modes[name]))
    for name in ("sst2", "sst2/1", "sst2/1/variables", "sst2/1/assets.extra"):
        assert modes[name] == folder_mode, (name, oct(modes[name]))


def test_an_export_gets_the_modes_the_umask_gives(model):
    old = os.umask(0o027)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            export_for_serving(model, os.path.join(scratch, "serving"), "sst2")
            _assert_modes(_modes(os.path.join(scratch, "serving")), 0o640, 0o750)
    finally:
        os.umask(old)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_user_reads_every_file_of_an_export(model):
    old = os.umask(0o022)
    try:
        scratch = tempfile.mkdtemp(dir="/tmp")                     # /tmp's own sub-folders are owner-only
        os.chmod(scratch, 0o755)                                    # a volume the server's user may enter
        export_for_serving(model, os.path.join(scratch, "serving"), "sst2")
    finally:
        os.umask(old)
    try:
        _assert_modes(_modes(os.path.join(scratch, "serving")), 0o644, 0o755)
        # The server reads every file of the base path; `find ... -exec cat` as nobody fails on any it cannot.
        done = subprocess.run(["find", os.path.join(scratch, "serving"), "-type", "f", "-exec", "cat", "{}", "+"],
                              user="nobody", capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
        assert len(done.stdout) > 1_000_000                          # the variables were read, not skipped
    finally:
        subprocess.run(["rm", "-rf", scratch], check=True)
