"""The Colab/Kaggle TPU notebook (the JAX route) runs top to bottom on CPU with 8 simulated JAX devices (data
parallel, tiny BERT), so it cannot rot; the file in the repository is what tools/make_notebook.py writes."""

import pytest
import os

from conftest import REPO

NOTEBOOK = os.path.join(REPO, "notebooks", "colab_tpu_finetune.ipynb")


def test_notebook_is_generated_from_its_script():
    import runpy

    import nbformat
    cells = runpy.run_path(os.path.join(REPO, "tools", "make_notebook.py"))["CELLS"]     # not __main__: no write
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert [c.source for c in nb.cells] == [source for _, source in cells], "stale: run tools/make_notebook.py"
    assert nb.metadata["accelerator"] == "TPU"


@pytest.mark.jax
def test_notebook_runs_on_cpu_with_eight_devices(minilm_dir, tmp_path):
    import nbclient
    import nbformat
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env_keys = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO),
                "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    old = {k: os.environ.get(k) for k in env_keys}
    os.environ.update(env_keys)
    try:
        nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    outputs = {i: "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
               for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    text = "\n".join(outputs.values())
    assert "jax cpu x 8 | data parallel over 8" in text
    assert "'probabilities'" in text and "'label'" in text            # reloaded.classify: names and probabilities
    # The SavedModel answered raw text with the training labels' names.
    last = outputs[max(outputs)]
    assert "/sst2/1 [" in last and ("['0'," in last or "['1'," in last), last
