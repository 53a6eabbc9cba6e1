"""Attention maps on Keras' JAX backend (issue 42): the real all-MiniLM-L6-v2 weights loaded in a JAX process give
every layer's attention probabilities of TensorFlow's within 1e-5 at the real query rows of a padded batch (and
TensorFlow's equal transformers', tests/test_attention_torch.py); bert_keras.attention reads one text there too.
One subprocess, about half a minute."""

import json

import numpy as np
import pytest

from backend_process import run_script

pytestmark = pytest.mark.jax

TEXTS = ["The cat sat on the mat because it was tired.", "ok", "Ünïcödé — “quoted”"]

JAX_SIDE = """
import json, sys
import numpy as np, keras
from bert_keras.attention import attention_maps
from bert_keras.loading import load_backbone
assert keras.backend.backend() == "jax"
folder, minilm = sys.argv[1], sys.argv[2]
texts = json.load(open(folder + "/texts.json"))
encoder, pre = load_backbone(minilm)
ids = {k: np.asarray(v) for k, v in pre(texts).items()}
maps = encoder(ids, attention_maps=True)["attention_maps"]
one, tokens = attention_maps(encoder, pre, texts[0])
np.savez(folder + "/jax.npz", one=one, tokens=np.array(tokens), mask=ids["input_mask"],
         **{f"layer_{i}": keras.ops.convert_to_numpy(m) for i, m in enumerate(maps)})
"""


def test_minilm_attention_maps_on_jax_match_tensorflow(tmp_path, minilm_dir):
    from bert_keras.attention import attention_maps
    from bert_keras.loading import load_backbone
    encoder, pre = load_backbone(minilm_dir)
    ids = {k: np.asarray(v) for k, v in pre(TEXTS).items()}
    ours = [np.asarray(m) for m in encoder(ids, attention_maps=True)["attention_maps"]]
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS))
    script = tmp_path / "jax_side.py"
    script.write_text(JAX_SIDE)
    run_script(script, tmp_path, minilm_dir, backend="jax")
    theirs = np.load(tmp_path / "jax.npz")
    np.testing.assert_array_equal(theirs["mask"], ids["input_mask"])
    rows = np.broadcast_to(ids["input_mask"].astype(bool)[:, None, :, None], ours[0].shape)
    for i, layer in enumerate(ours):                 # padding query rows differ: computed on JAX, skipped on TF
        np.testing.assert_allclose(theirs[f"layer_{i}"][rows], layer[rows], atol=1e-5, rtol=0, err_msg=f"layer {i}")
    one, tokens = attention_maps(encoder, pre, TEXTS[0])
    assert theirs["tokens"].tolist() == tokens
    np.testing.assert_allclose(theirs["one"], one, atol=1e-5, rtol=0)
