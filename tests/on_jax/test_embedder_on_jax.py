"""Embedders on Keras' JAX backend (issue 56): the `.keras` files written here (the real all-MiniLM-L6-v2
sentence-transformers folder, and a bert_tiny embedder with prompts, CLS + mean pooling, a Dense layer and the
prompt left out of the pooling) load in a JAX process and `encode` as they do on TensorFlow within 1e-5, for every
prompt. tests/tasks/test_embedder_torch.py ties the TensorFlow side to sentence-transformers 6.2 itself."""

import json

import keras
import numpy as np
import pytest

from backend_process import run_on_backend

pytestmark = pytest.mark.jax

TEXTS = ["A man is playing a guitar.", "", "Ünïcödé — “quoted” text", "the cat " * 200]

JAX_SIDE = """
import json, sys
import numpy as np, keras
import bert_keras
assert keras.backend.backend() == "jax"
folder = sys.argv[1]
cases = json.load(open(folder + "/cases.json"))
out = {}
for name, prompt_names in cases["models"].items():
    model = keras.models.load_model(f"{folder}/{name}.keras", safe_mode=True)
    for prompt_name in prompt_names:
        out[f"{name}/{prompt_name}"] = model.encode(cases["texts"], prompt_name=prompt_name).tolist()
json.dump(out, open(folder + "/jax.json", "w"))
"""


def test_encode_on_jax_equals_tensorflow(minilm_dir, minilm_vocab, tmp_path):
    from bert_keras import BertEncoder, BertPreprocessor, preset_config
    from bert_keras.tasks import BertEmbedder, load_task_model
    keras.utils.set_random_seed(0)
    models = {"minilm": (load_task_model(minilm_dir), [None]),
              "tiny": (BertEmbedder(BertEncoder(preset_config("bert_tiny")), pooling=["cls", "mean"],
                                    include_prompt=False, dense=[{"units": 32, "activation": "tanh"}],
                                    normalize=True, prompts={"query": "query: ", "passage": "passage: "},
                                    preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=48)),
                       [None, "query", "passage"])}
    want = {}
    for name, (model, prompt_names) in models.items():
        model.save(tmp_path / f"{name}.keras")
        for prompt_name in prompt_names:
            want[f"{name}/{prompt_name}"] = model.encode(TEXTS, prompt_name=prompt_name)
    (tmp_path / "cases.json").write_text(json.dumps({"texts": TEXTS, "models": {n: p for n, (_, p) in
                                                                                   models.items()}}))
    run_on_backend(f"import sys; sys.argv = ['x', {str(tmp_path)!r}]\n" + JAX_SIDE, backend="jax")
    got = json.loads((tmp_path / "jax.json").read_text())
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_allclose(np.array(got[key]), value, atol=1e-5, err_msg=key)
