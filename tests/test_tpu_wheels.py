"""The TPU install ends with TPU TensorFlow (issue 32), checked without a TPU: the wheel built from this checkout is
installed by TensorFlow's TPU-route install (tools/make_notebook.py's TF_TPU_INSTALL_CELL, run as a faked Kaggle
TPU VM) into a new virtual environment, from a folder outside the source tree. `tensorflow-text` brings the CPU `tensorflow`
wheel and the `tpu` extra `tensorflow-tpu`; both write tensorflow/. The files on disk are compared here with the
RECORD pip wrote for each wheel (read with csv and hashlib, not with the code under test). Then the CPU wheel goes
back over it, as a later install can do, and the TPU path must stop with the fix; the fix must then work.
The libtpu the `tpu` extra pins must hold every function the TPU build looks up at import (PyPI's newest does not:
"ConfigureDistributedTpuOp_DoWork not available in this library", then abort). The check runs as a file, as the
notebook runs it: with no TPU here, importing the TPU build waits on the cloud metadata server, so
`python -m bert_keras.training.tpu_install`, which imports bert_keras and so TensorFlow, is not used for it.
Slow: the TF stack, tensorflow-tpu (263 MB) and libtpu (137 MB) come from PyPI or pip's cache."""

import base64
import csv
import hashlib
import mmap
import runpy

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

FIX = "Fix: `pip install --force-reinstall --no-deps tensorflow-tpu==2.20.0` (in a notebook: %pip install ...), " \
      "then restart the runtime."


def record(dist_info):
    """{path: (sha256 as RECORD writes it, size)} for the tensorflow/ files of a RECORD pip wrote."""
    with open(dist_info / "RECORD", newline="") as f:
        return {row[0]: (row[1], int(row[2])) for row in csv.reader(f) if row[0].startswith("tensorflow/") and row[1]}


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def tpu_lookups(library):
    """The functions TensorFlow's TPU build looks up in libtpu at import: each has its own "<name> not available in
    this library." message in the TPU build's library (it aborts with it when the lookup fails)."""
    suffix, names = b" not available in this library.", set()
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at = data.find(suffix)
        while at >= 0:
            names.add(bytes(data[data.rfind(b"\0", 0, at) + 1:at]))
            at = data.find(suffix, at + 1)
    return names


def missing_from(library, names):
    """The names with no NUL-terminated string of their own in `library`."""
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return sorted(name.decode() for name in names if data.find(name + b"\0") < 0)


def not_on_disk(site, files):
    """The files of a RECORD whose bytes on disk are not the recorded ones."""
    return sorted(path for path, (hash_, size) in files.items() if not (site / path).is_file()
                  or (site / path).stat().st_size != size or sha256(site / path) != hash_)


def test_the_notebook_install_leaves_tpu_tensorflow_and_the_check_catches_the_cpu_build(wheel_venv):
    python, run, site = str(wheel_venv.python), wheel_venv.run, wheel_venv.site
    wheel_venv.env.update(BERT_KERAS_SOURCE=str(wheel_venv.wheel), KAGGLE_KERNEL_RUN_TYPE="Interactive",
                          TPU_ACCELERATOR_TYPE="v2-8")          # a Kaggle TPU VM, as far as the install cell can tell

    # 1. The notebook's install cell, as the notebook runs it.
    cell = runpy.run_path(str(REPO / "tools" / "make_notebook.py"))["TF_TPU_INSTALL_CELL"]
    installed = run(python, "-c", cell)
    assert "TensorFlow on disk: tensorflow-tpu 2.20.0 (the TPU build)" in installed.stdout
    check = [python, str(site / "bert_keras" / "training" / "tpu_install.py")]          # the notebook's way
    tpu, cpu = record(site / "tensorflow_tpu-2.20.0.dist-info"), record(site / "tensorflow-2.20.0.dist-info")
    assert not_on_disk(site, tpu) == [], "tensorflow/ on disk is not tensorflow-tpu's"
    # Both wheels are installed, and their libraries differ (so the comparison above can fail).
    lib = "tensorflow/libtensorflow_cc.so.2"
    assert tpu[lib] != cpu[lib]
    # The libtpu the extra brings has every function the TPU build looks up at import (PyPI's newest lacks 142 of
    # 212, and `import tensorflow` then aborts).
    lookups = tpu_lookups(site / lib)
    assert len(lookups) > 100 and b"ConfigureDistributedTpuOp_DoWork" in lookups
    assert missing_from(site / "libtpu" / "libtpu.so", lookups) == []

    # 2. A later install puts the CPU build's files back.
    run(python, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", "tensorflow==2.20.0")
    assert lib in not_on_disk(site, tpu) and not_on_disk(site, {lib: cpu[lib]}) == []
    # The TPU path (TPU signs: $TPU_ACCELERATOR_TYPE, and libtpu is really installed) stops before connecting.
    stopped = run(python, "-c", "from bert_keras.training import create_strategy; create_strategy('auto')", ok=False)
    message = stopped.stderr.strip().splitlines()[-1]
    assert message.startswith("RuntimeError: This machine is a TPU VM (v2-8; seen: $TPU_ACCELERATOR_TYPE=v2-8; "
                              "libtpu is installed) but this TensorFlow cannot use the TPU: tensorflow-tpu 2.20.0 is "
                              "installed, but the TensorFlow files on disk are not its: ")
    assert "they are tensorflow 2.20.0 (the CPU build)" in message and message.endswith(FIX), message
    print(message)
    script = run(*check, ok=False)
    assert script.stdout.startswith("TensorFlow on disk: tensorflow 2.20.0 (the CPU build)")
    assert script.stderr.strip().endswith(FIX)

    # 3. The fix, as the message gives it.
    run(python, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", "tensorflow-tpu==2.20.0")
    assert not_on_disk(site, tpu) == []
    assert run(*check).stdout.startswith(
        "TensorFlow on disk: tensorflow-tpu 2.20.0 (the TPU build)")
