"""MLM + NSP heads against transformers' BertForPreTraining (a tiny seeded model saved as a fixture by
tools/make_reference_fixtures.py), through our Hugging Face import of both encoder and `cls` heads."""

import keras
import numpy as np
import pytest

from bert_keras import BertEncoder, read_checkpoint, save_google_checkpoint
from bert_keras.checkpoints.names import assign_encoder_weights, split_heads
from bert_keras.tasks.pretrainer import BertPretrainer, pretraining_loss
from conftest import FIXTURES

FOLDER = FIXTURES / "tiny_bert_for_pretraining"


def _pretrainer():
    config, tensors, fmt = read_checkpoint(str(FOLDER))
    weights, heads = split_heads(tensors)
    encoder = BertEncoder(config)
    assign_encoder_weights(encoder, weights)
    model = BertPretrainer(encoder)
    model.assign_heads(heads)
    return model, heads


def test_mlm_and_nsp_logits_match_transformers_bert_for_pretraining():
    ref = np.load(FOLDER / "outputs.npz")
    model, _ = _pretrainer()
    out = model({k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")})
    np.testing.assert_allclose(out["mlm_logits"], ref["mlm_logits"], atol=1e-5)
    np.testing.assert_allclose(out["nsp_logits"], ref["nsp_logits"], atol=1e-5)


def test_mlm_output_weights_are_the_word_embeddings():
    model, _ = _pretrainer()
    table = model.encoder.embeddings.word_embeddings.embeddings
    owned = [v for v in model.trainable_weights if tuple(v.shape) == tuple(table.shape)]
    assert len(owned) == 1                       # one [V, H] matrix: the embedding, used twice


def test_heads_survive_keras_save_and_google_checkpoint_round_trip(tmp_path):
    model, heads = _pretrainer()
    ref = np.load(FOLDER / "outputs.npz")
    x = {k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
    model.save(tmp_path / "p.keras")
    again = keras.models.load_model(tmp_path / "p.keras")
    np.testing.assert_array_equal(again(x)["mlm_logits"], model(x)["mlm_logits"])
    save_google_checkpoint(model.encoder, str(tmp_path / "tf1"), heads=model.head_weights())
    _, tensors, fmt = read_checkpoint(str(tmp_path / "tf1"))
    assert fmt == "google"
    for name, value in heads.items():
        np.testing.assert_array_equal(tensors[name], value, err_msg=name)


def test_loss_is_google_research_weighted_mean():
    logits = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]], "float32"))
    ids, weights = np.array([[0, 2, 1]]), np.array([[1.0, 1.0, 0.0]])      # the third slot is padding
    want = -(np.log(0.7) + np.log(0.8)) / 2
    assert float(pretraining_loss(logits, ids, weights)) == pytest.approx(want, rel=1e-4)
    nsp = np.log(np.array([[0.9, 0.1]], "float32"))
    assert float(pretraining_loss(logits, ids, weights, nsp, np.array([0]))) == pytest.approx(
        want - np.log(0.9), rel=1e-4)


def test_missing_head_weight_is_named():
    model, heads = _pretrainer()
    del heads["cls/predictions/output_bias"]
    with pytest.raises(ValueError, match="cls/predictions/output_bias"):
        model.assign_heads(heads)
