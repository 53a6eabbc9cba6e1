"""The wheel a user installs (`make wheel`): built from this checkout, installed into a new virtual environment,
run from a folder outside the source tree: `bert-keras --help`, then a tiny fine-tune on the SST-2 sample the
wheel ships, exported and run on TF Serving's session path. Slow: the install fetches the TF stack (pip's cache
makes it minutes)."""

import pathlib

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow


def test_the_wheel_installs_and_runs_outside_the_source_tree(minilm_vocab, wheel_venv):
    wheel_venv.run(wheel_venv.python, "-m", "pip", "install", "-q", wheel_venv.wheel)
    python, cli, run = wheel_venv.python, wheel_venv.bin / "bert-keras", wheel_venv.run
    help_text = run(cli, "--help").stdout
    assert "finetune" in help_text and "export" in help_text
    where = run(python, "-c", "import bert_keras, savedmodels.ops as o, bert_keras_cli.demo as d; "
                "print(bert_keras.__file__); print(d.SAMPLES); print(sorted(o.serving_op_allowlist())[:1])").stdout
    package, samples = where.splitlines()[:2]
    assert pathlib.Path(package).is_relative_to(wheel_venv.venv) and not pathlib.Path(package).is_relative_to(REPO)
    run(cli, "finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
        "--train", f"{samples}/sst2_train.tsv", "--eval", f"{samples}/sst2_dev.tsv", "--out", "run",
        "--epochs", "1", "--batch-size", "16", "--max-train-examples", "64", "--max-eval-examples", "32",
        "--max-seq-length", "64")
    run(cli, "export", "--model", "run", "--base-path", "serving", "--name", "sst2")
    out = run(python, "-c", "from savedmodels.session_bundle import SessionBundle; "
              "b = SessionBundle('serving/sst2/1'); print(b.warmup()); "
              "print(b.run('serving_default', {'text': ['a fine film', '']})['probabilities'].shape)").stdout
    assert out.split() == ["1", "(2,", "2)"]
