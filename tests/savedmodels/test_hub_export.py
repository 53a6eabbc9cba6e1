"""TF Hub-style export (`bert-keras export-hub`): the real MiniLM weights, loaded in a fresh process that imports
only tensorflow and tensorflow_text, against PyTorch transformers' outputs and HF tokenizers' ids (the committed
fixture made by tools/make_reference_fixtures.py). Two loaders: `tf.saved_model.load`, what `hub.KerasLayer` uses
for the TF Hub API (`__call__`, `tokenize`, `bert_pack_inputs`, the variable lists), and TF Serving's session path
(session_path.py) for the `serving_default` signatures."""

import json
import os
import subprocess
import sys

import numpy as np

from bert_keras_cli.main import main
from conftest import FIXTURES
from session_path import run_signatures

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from make_reference_fixtures import SENTENCES  # noqa: E402


def test_hub_style_preprocessor_and_encoder_match_transformers(minilm_dir, tmp_path):
    out = tmp_path / "hub"
    assert main(["export-hub", "--model", minilm_dir, "--out", str(out), "--seq-length", "64"]) == 0
    singles = [a for a, b in SENTENCES if b is None]
    pair = [(a, b) for a, b in SENTENCES if b is not None]
    script = f"""
import json, sys, numpy as np, tensorflow as tf, tensorflow_text
pre = tf.saved_model.load({str(out / 'preprocessor')!r}); enc = tf.saved_model.load({str(out / 'encoder')!r})
rows = json.loads({json.dumps(json.dumps(SENTENCES))})
ids = []
for a, b in rows:
    if b is None:
        x = pre(tf.constant([a]))
    else:
        x = pre.bert_pack_inputs([pre.tokenize(tf.constant([a])), pre.tokenize(tf.constant([b]))], seq_length=64)
    ids.append({{k: v.numpy()[0].tolist() for k, v in x.items()}})
batch = {{k: tf.constant([r[k] for r in ids]) for k in ids[0]}}
out = enc(batch, training=False)
served = enc.signatures["serving_default"](**batch)
assert not [m for m in sys.modules if m.startswith(("bert_keras", "savedmodels"))]
print(json.dumps({{"ids": ids, "sequence": out["sequence_output"].numpy().tolist(),
                  "pooled": out["pooled_output"].numpy().tolist(), "layers": len(out["encoder_outputs"]),
                  "served": served["pooled_output"].numpy().tolist(), "variables": len(enc.trainable_variables),
                  "signatures": sorted(pre.signatures) + sorted(enc.signatures)}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    ref = np.load(FIXTURES / "minilm_reference.npz")
    width = ref["input_word_ids"].shape[1]
    for i, row in enumerate(got["ids"]):
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            assert row[name][:width] == ref[name][i].tolist() and not any(row[name][width:])
    mask = ref["input_mask"][..., None]
    sequence = np.array(got["sequence"])[:, :width]
    assert np.abs((sequence - ref["sequence_output"]) * mask).max() <= 1e-5
    assert np.abs(np.array(got["pooled"]) - ref["pooled_output"]).max() <= 1e-5
    assert np.abs(np.array(got["served"]) - ref["pooled_output"]).max() <= 1e-5
    assert got["layers"] == 6 and got["variables"] > 100
    assert got["signatures"] == ["serving_default", "serving_default"]
    assert len(singles) == 3 and len(pair) == 1
    # TF Serving's path: the preprocessor's and the encoder's serving_default signatures.
    batch = {k: [r[k] for r in got["ids"]] for k in got["ids"][0]}
    served_ids, served = run_signatures([
        {"path": str(out / "preprocessor"), "signature": "serving_default", "inputs": {"text": singles}},
        {"path": str(out / "encoder"), "signature": "serving_default", "inputs": batch}])
    single_rows = [i for i, (_, b) in enumerate(SENTENCES) if b is None]
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        assert [row[:width] for row in served_ids[name]] == ref[name][single_rows].tolist()
    assert np.abs(np.array(served["pooled_output"]) - ref["pooled_output"]).max() <= 1e-5
    assert np.abs((np.array(served["sequence_output"])[:, :width] - ref["sequence_output"]) * mask).max() <= 1e-5
    # a second export to the same folder is refused, the first left intact
    assert main(["export-hub", "--model", minilm_dir, "--out", str(out)]) == 2
    assert sorted(os.listdir(out)) == ["encoder", "preprocessor"]
