"""Real weights (all-MiniLM-L6-v2) against PyTorch transformers and keras-hub."""

import numpy as np
import pytest

from bert_keras import load_checkpoint
from conftest import FIXTURES


def test_minilm_matches_pytorch_transformers_to_1e_5(minilm_dir):
    # Reference outputs made by tools/make_reference_fixtures.py with torch 2.13.0 + transformers' BertModel.
    ref = np.load(FIXTURES / "minilm_reference.npz")
    config, encoder = load_checkpoint(minilm_dir)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    out = encoder({k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    mask = ref["input_mask"][..., None]
    assert np.abs((np.asarray(out["sequence_output"]) - ref["sequence_output"]) * mask).max() <= 1e-5
    assert np.abs((np.asarray(out["encoder_outputs"][2]) - ref["layer_3_output"]) * mask).max() <= 1e-5
    assert np.abs(np.asarray(out["pooled_output"]) - ref["pooled_output"]).max() <= 1e-5
    # the classification heads' path: only [CLS] is computed in the last layer
    pooled = encoder({k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}, pooled_only=True)
    assert np.abs(np.asarray(pooled) - ref["pooled_output"]).max() <= 1e-5


def test_keras_hub_converter_agrees_given_exact_gelu(minilm_dir):
    """keras-hub converts the same HF folder with its own code; with its tanh GELU swapped for erf GELU
    the two models agree to float precision, and with its default tanh GELU they differ by ~2e-3."""
    import keras_hub
    import keras
    backbone = keras_hub.models.BertBackbone.from_preset(minilm_dir)
    _, encoder = load_checkpoint(minilm_dir)
    ref = np.load(FIXTURES / "minilm_reference.npz")
    hub_inputs = {"token_ids": ref["input_word_ids"], "padding_mask": ref["input_mask"],
                  "segment_ids": ref["input_type_ids"]}
    mask = ref["input_mask"][..., None]
    ours = np.asarray(encoder({k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
                      ["sequence_output"])
    tanh_gelu_diff = np.abs((np.asarray(backbone(hub_inputs)["sequence_output"]) - ours) * mask).max()
    for layer in backbone.transformer_layers:
        layer._feedforward_intermediate_dense.activation = lambda x: keras.activations.gelu(x, approximate=False)
    exact_diff = np.abs((np.asarray(backbone(hub_inputs)["sequence_output"]) - ours) * mask).max()
    print(f"keras-hub vs ours: tanh GELU {tanh_gelu_diff:.2e}, erf GELU {exact_diff:.2e}")
    assert exact_diff <= 1e-5
    assert 1e-4 < tanh_gelu_diff < 1e-2


def test_a_truncated_safetensors_file_is_named(minilm_dir, tmp_path):
    import shutil
    for name in ("config.json", "vocab.txt"):
        shutil.copyfile(f"{minilm_dir}/{name}", tmp_path / name)
    with open(f"{minilm_dir}/model.safetensors", "rb") as f:
        (tmp_path / "model.safetensors").write_bytes(f.read(100_000))        # an interrupted download
    with pytest.raises(ValueError, match=r"model\.safetensors cannot be read .*cut short"):
        load_checkpoint(str(tmp_path))
