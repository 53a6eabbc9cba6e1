"""The JAX route's install, checked without a TPU (issue 41): the wheel built from this checkout is installed by the
notebook's own install cell (tools/make_notebook.py's INSTALL_CELL, run as a faked Kaggle TPU VM) into a new
virtual environment beside the JAX the image would have (here jax 0.10.2, the CPU build, standing in for the image's
jax[tpu]); it leaves that JAX as it was and never installs tensorflow-tpu. Then `bert-keras finetune` on the faked TPU
VM ($TPU_ACCELERATOR_TYPE) takes Keras' JAX backend by itself and stops with the fix because JAX sees no TPU; with
JAX removed it stays on TensorFlow and names the JAX route's install. Slow: the TF stack and JAX come from PyPI or
pip's cache."""

import os
import runpy

import numpy as np
import pytest

from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.jax]


def test_the_install_cell_keeps_the_images_jax_and_a_tpu_vm_is_routed_to_jax(wheel_venv, minilm_vocab):
    python, run = str(wheel_venv.python), wheel_venv.run
    run(python, "-m", "pip", "install", "-q", "jax==0.10.2", "jaxlib==0.10.2")       # the image's JAX
    wheel_venv.env.pop("KERAS_BACKEND", None)          # nobody chose a backend (the tests' own process did)
    wheel_venv.env.update(BERT_KERAS_SOURCE=str(wheel_venv.wheel), KAGGLE_KERNEL_RUN_TYPE="Interactive",
                          TPU_ACCELERATOR_TYPE="v5litepod-8")    # a Kaggle TPU VM, as far as the cell can tell
    cell = runpy.run_path(str(REPO / "tools" / "make_notebook.py"))["INSTALL_CELL"]
    installed = run(python, "-c", cell)
    assert "JAX 0.10.2 devices: cpu x 1" in installed.stdout                      # the cell's own report
    versions = run(python, "-m", "pip", "list", "--format=freeze").stdout.lower().split()
    assert "jax==0.10.2" in versions and "jaxlib==0.10.2" in versions             # left alone
    assert not [v for v in versions if v.startswith("tensorflow-tpu") or v.startswith("libtpu")]
    assert any(v.startswith("bert-keras==") or v.startswith("bert_keras==") for v in versions)

    (wheel_venv.work / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"film {i}\t{i % 2}\n" for i in range(32)))
    finetune = [wheel_venv.bin / "bert-keras", "finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab",
                minilm_vocab, "--train", "train.tsv", "--out", "run", "--batch-size", "8", "--quiet"]
    routed = run(*finetune, ok=False)
    assert "Keras' JAX backend" in routed.stdout and "v5litepod-8" in routed.stdout
    assert "JAX sees no TPU" in routed.stderr and "pip install -U 'jax[tpu]'" in routed.stderr, routed.stderr[-2000:]
    run(python, "-m", "pip", "uninstall", "-q", "-y", "jax", "jaxlib")
    no_jax = run(*finetune, ok=False)
    assert "pip install -U 'jax[tpu]', then --backend jax" in no_jax.stderr, no_jax.stderr[-2000:]


# Kaggle's TPU image (Kaggle/docker-python at 78aaa43, 2026-08-12: tpu/config.txt and tpu/requirements.in): Python
# 3.12, `tensorflow-cpu==2.20.0`, an unpinned `jax[tpu]` and `keras>3`. Pinned here to what pip resolved on
# 2026-11-28 (jax 0.12.0.1, keras 3.15.1), the CPU jax standing in for jax[tpu].
KAGGLE_TPU_PYTHON = "3.12"
KAGGLE_TPU_PACKAGES = ("tensorflow-cpu==2.20.0", "jax==0.12.0.1", "keras==3.15.1")


def python_named(version: str) -> str | None:
    """An interpreter of `version` on this machine (PATH, then pyenv's versions), or None."""
    import glob
    import shutil
    import subprocess
    for candidate in [shutil.which(f"python{version}"), *sorted(glob.glob(
            os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def test_on_kaggles_tpu_package_mix_the_jax_route_trains_and_its_export_serves(tmp_path, minilm_vocab):
    """Kaggle's TPU image as pip sees it: tensorflow-cpu, a newer JAX than `make test-jax` pins, Python 3.12. The
    install cell adds the wheel with its `tensorflow` (the same 2.20.0 build's files over tensorflow-cpu's) and
    leaves the image's JAX; `finetune --backend jax` trains data parallel on 8 simulated devices; the `.keras` it
    saved gives, in this test's own TensorFlow process (Python 3.11, jax-free Keras), the logits that its export
    gives on TF Serving's path (the TF1 loader) inside the image's mix."""
    import json

    from conftest import WheelVenv
    from session_path import run_signatures
    base = python_named(KAGGLE_TPU_PYTHON)
    if base is None:
        pytest.skip(f"Kaggle's TPU image runs Python {KAGGLE_TPU_PYTHON}; no python{KAGGLE_TPU_PYTHON} here")
    venv = WheelVenv(tmp_path, base_python=base)
    python, run = str(venv.python), venv.run
    run(python, "-m", "pip", "install", "-q", *KAGGLE_TPU_PACKAGES)             # the image
    venv.env.pop("KERAS_BACKEND", None), venv.env.pop("XLA_FLAGS", None)
    venv.env.update(BERT_KERAS_SOURCE=str(venv.wheel), KAGGLE_KERNEL_RUN_TYPE="Interactive")   # a Kaggle notebook
    cell = runpy.run_path(str(REPO / "tools" / "make_notebook.py"))["INSTALL_CELL"]
    assert "JAX 0.12.0.1 devices: cpu x 1 | TensorFlow 2.20.0" in run(python, "-c", cell).stdout
    versions = run(python, "-m", "pip", "list", "--format=freeze").stdout.lower().replace("_", "-").split()
    assert {"tensorflow-cpu==2.20.0", "tensorflow==2.20.0", "jax==0.12.0.1", "keras==3.15.1"} <= set(versions)
    assert not [v for v in versions if v.startswith(("tensorflow-tpu", "libtpu"))]

    (venv.work / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{'a fine film' if i % 2 else 'a dull film'} {i}\t{i % 2}\n" for i in range(64)))
    venv.env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    run(venv.bin / "bert-keras", "finetune", "--backend", "jax", "--task", "sst-2", "--model", "bert_tiny", "--vocab",
        minilm_vocab, "--train", "train.tsv", "--out", "run", "--batch-size", "16", "--epochs", "1", "--quiet")
    record = json.loads((venv.work / "run" / "metrics.json").read_text())
    assert record["host"]["backend"] == "jax" and record["host"]["devices"] == "cpu x 8", record
    run(venv.bin / "bert-keras", "export", "--model", "run", "--base-path", "models", "--name", "sst2")

    texts = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "ok"]
    served, = run_signatures([{"path": str(venv.work / "models" / "sst2" / "1"), "signature": "serving_default",
                               "inputs": {"text": texts}}], python=python)
    import keras
    import tensorflow as tf

    import bert_keras  # noqa: F401  (registers the model's classes for load_model)
    model = keras.models.load_model(venv.work / "run" / "model.keras")
    ours = model.serve(tf.constant(texts))["logits"].numpy()
    assert np.abs(ours).max() > 1e-3                                  # a trained head, not zeros
    np.testing.assert_allclose(served["logits"], ours, atol=1e-5, rtol=0)
