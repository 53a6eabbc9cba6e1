"""The same `keras.ops` model code on Keras' PyTorch backend: the real all-MiniLM-L6-v2 encoder saved here on
TensorFlow, loaded in a process with KERAS_BACKEND=torch, gives TensorFlow's hidden states within 1e-5 at the real
tokens, and a classifier answers raw text there through its host preprocessing (tf.data) with TensorFlow's
probabilities. A forward pass only: training on PyTorch is not part of bert_keras' routes (TensorFlow, JAX)."""

import json

import keras
import numpy as np
import pytest

from backend_process import run_script

pytestmark = pytest.mark.torch

TEXTS = ["a charming and often affecting journey .", "Ünïcödé — “quoted”", "ok"]

TORCH_SIDE = """
import json, sys
import numpy as np, keras, bert_keras
assert keras.backend.backend() == "torch"
folder = sys.argv[1]
texts = json.load(open(folder + "/texts.json"))
classifier = keras.models.load_model(folder + "/classifier.keras")
ids = {k: np.asarray(v) for k, v in classifier.preprocessor(texts).items()}
hidden = classifier.encoder(ids)
out = {f"layer_{i}": keras.ops.convert_to_numpy(h) for i, h in enumerate(hidden["encoder_outputs"])}
out["probabilities"] = classifier.serve_numpy(texts)["probabilities"]
np.savez(folder + "/torch.npz", **out)
"""


def test_minilm_forward_on_torch_matches_tensorflow(tmp_path, minilm_dir):
    from bert_keras.loading import load_backbone
    from bert_keras.tasks import BertClassifier
    keras.utils.set_random_seed(0)
    encoder, pre = load_backbone(minilm_dir, max_seq_length=64)
    classifier = BertClassifier(encoder, 2, preprocessor=pre)
    classifier.save(tmp_path / "classifier.keras")
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS))
    ids = {k: v.numpy() for k, v in pre(TEXTS).items()}
    ours = encoder(ids)["encoder_outputs"]
    probabilities = classifier.serve_numpy(TEXTS)["probabilities"]
    script = tmp_path / "torch_side.py"
    script.write_text(TORCH_SIDE)
    run_script(script, tmp_path, backend="torch")
    theirs = np.load(tmp_path / "torch.npz")
    real = ids["input_mask"].astype(bool)
    for i, layer in enumerate(ours):
        np.testing.assert_allclose(theirs[f"layer_{i}"][real], layer.numpy()[real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(theirs["probabilities"], probabilities, atol=1e-5, rtol=0)
