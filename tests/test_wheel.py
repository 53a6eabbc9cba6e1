"""The wheel a user installs (`make wheel`): built from this checkout, installed into a new virtual environment,
run from a folder outside the source tree: `bert-keras --help`, then a tiny fine-tune on the SST-2 sample the
wheel ships, exported and run on TF Serving's session path. Slow: the install fetches the TF stack (pip's cache
makes it minutes)."""

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow


def test_the_wheel_installs_and_runs_outside_the_source_tree(minilm_vocab, tmp_path):
    dist, venv, work = tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = next(dist.glob("bert_keras-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python, cli = venv / "bin" / "python", venv / "bin" / "bert-keras"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"

    def run(*args):
        result = subprocess.run([*map(str, args)], capture_output=True, text=True, cwd=work, env=env)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        return result.stdout

    assert "finetune" in run(cli, "--help") and "export" in run(cli, "--help")
    where = run(python, "-c", "import bert_keras, savedmodels.ops as o, bert_keras_cli.demo as d; "
                "print(bert_keras.__file__); print(d.SAMPLES); print(sorted(o.serving_op_allowlist())[:1])")
    package, samples = where.splitlines()[:2]
    assert pathlib.Path(package).is_relative_to(venv) and not pathlib.Path(package).is_relative_to(REPO)
    run(cli, "finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
        "--train", f"{samples}/sst2_train.tsv", "--eval", f"{samples}/sst2_dev.tsv", "--out", "run",
        "--epochs", "1", "--batch-size", "16", "--max-train-examples", "64", "--max-eval-examples", "32",
        "--max-seq-length", "64")
    run(cli, "export", "--model", "run", "--base-path", "serving", "--name", "sst2")
    out = run(python, "-c", "from savedmodels.session_bundle import SessionBundle; "
              "b = SessionBundle('serving/sst2/1'); print(b.warmup()); "
              "print(b.run('serving_default', {'text': ['a fine film', '']})['probabilities'].shape)")
    assert out.split() == ["1", "(2,", "2)"]
