"""The README's notebook snippet runs as written (load the fine-tuned model.keras, predict on text, classify,
fine-tune and evaluate on text), against a tiny `bert-keras finetune` run in runs/sst2 of a scratch folder."""

import re
import subprocess
import sys

from bert_keras.demo import SAMPLES
from conftest import REPO


def readme_block(marker: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text[text.index(marker):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


def test_notebook_snippet_runs_as_written(minilm_vocab, tmp_path):
    from bert_keras.cli import main
    assert main(["finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
                 "--train", f"{SAMPLES}/sst2_train.tsv", "--out", str(tmp_path / "runs" / "sst2"), "--epochs", "1",
                 "--batch-size", "16", "--max-train-examples", "64"]) == 0
    code = readme_block("<!-- tested: tests/test_readme.py")
    assert 'load_model("runs/sst2/model.keras")' in code and ".fit(" in code and ".classify(" in code
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
