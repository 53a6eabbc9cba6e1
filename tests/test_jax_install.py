"""The JAX route's install, checked without a TPU (issue 41): the wheel built from this checkout is installed by the
notebook's own install cell (tools/make_notebook.py's INSTALL_CELL, run as a faked Kaggle TPU VM) into a new
virtual environment beside the JAX the image would have (here jax 0.10.2, the CPU build, standing in for the image's
jax[tpu]); it leaves that JAX as it was and never installs tensorflow-tpu. Then `bert-keras finetune` on the faked TPU
VM ($TPU_ACCELERATOR_TYPE) takes Keras' JAX backend by itself and stops with the fix because JAX sees no TPU; with
JAX removed it stays on TensorFlow and names the JAX route's install. Slow: the TF stack and JAX come from PyPI or
pip's cache."""

import runpy

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
