"""The README's notebook snippet runs as written (load the fine-tuned model.keras, predict on text, classify,
fine-tune and evaluate on text), against a tiny `bert-keras finetune` run in runs/sst2 of a scratch folder; the
README's export commands work from that one file."""

import re
import subprocess
import sys

import pytest

from bert_keras.data import SAMPLES
from conftest import REPO


def readme_block(marker: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text[text.index(marker):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


@pytest.fixture(scope="module")
def workdir(minilm_vocab, tmp_path_factory):
    """A scratch folder holding runs/sst2, a tiny `bert-keras finetune` run (what the README's commands assume)."""
    from bert_keras_cli.main import main
    folder = tmp_path_factory.mktemp("readme")
    assert main(["finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
                 "--train", f"{SAMPLES}/sst2_train.tsv", "--out", str(folder / "runs" / "sst2"), "--epochs", "1",
                 "--batch-size", "16", "--max-train-examples", "64"]) == 0
    return folder


def test_notebook_snippet_runs_as_written(workdir):
    code = readme_block("<!-- tested: tests/test_readme.py")
    assert 'load_model("runs/sst2/model.keras")' in code and ".fit(" in code and ".classify(" in code
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=workdir,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]


def test_every_command_works_from_the_one_file(workdir, tmp_path):
    """`bert-keras export` (also --precision int8) and `export-hub` take the finetune run's model.keras alone."""
    import keras
    import numpy as np

    from bert_keras_cli.main import main
    from savedmodels.session_bundle import SessionBundle
    run = workdir / "runs" / "sst2"
    assert sorted(p.name for p in run.iterdir() if p.is_file()) == ["metrics.json", "model.keras",
                                                                    "training_curves.png"]
    model = keras.models.load_model(run / "model.keras")
    texts = ["a gorgeous film", "a waste of time", ""]
    for name, flags in (("fp32", []), ("int8", ["--precision", "int8"])):
        assert main(["export", "--model", str(run / "model.keras"), "--base-path", str(tmp_path / "serving"),
                     "--name", name, *flags]) == 0
        served = SessionBundle(str(tmp_path / "serving" / name / "1")).run("serving_default", {"text": texts})
        np.testing.assert_allclose(served["logits"], model.predict(texts, verbose=0), atol=1e-5 if name == "fp32"
                                   else 0.05)
    assert (tmp_path / "serving" / "batching_parameters.txt").exists()
    assert main(["export-hub", "--model", str(run / "model.keras"), "--out", str(tmp_path / "hub")]) == 0
