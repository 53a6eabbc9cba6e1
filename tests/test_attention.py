"""Attention maps (issue 42, "Looking inside BERT"): `encoder(inputs, attention_maps=True)` gives each layer's
attention probabilities [B, N, S, S] float32, and leaves the outputs as they were; off, the outputs are bit for bit
those of a call without the argument. bert_keras.attention reads one text's maps without padding and draws them;
`bert-keras attention` writes them. On bert_tiny's shape with a tiny vocabulary (random weights): the maps are
checked against a NumPy recomputation from the blocks' own weights here, against transformers' on the real
MiniLM weights in tests/test_attention_torch.py."""

import dataclasses

import keras
import numpy as np
import pytest

from bert_keras import BertEncoder, BertPreprocessor, preset_config
from bert_keras.attention import attention_maps, draw_heads, draw_overview
from bert_keras_cli.main import main

WORDS = ["the", "cat", "sat", "on", "mat", "because", "it", "was", "tired", "a", "dog", "ran", ".", ","]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
TINY = dataclasses.replace(preset_config("bert_tiny"), vocab_size=len(VOCAB))          # L=2, H=128, N=2
KEYS = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(7)
    return BertEncoder(TINY)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def preprocessor(vocab_file):
    return BertPreprocessor(vocab_file)


def batch(lengths=(9, 4, 6), seq=12, seed=0):
    """Ids of texts of different lengths, padded to `seq`: [CLS] pieces [SEP], two segments in the first."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(seq)[None] < np.array(lengths)[:, None]).astype("int32")
    ids = rng.integers(5, len(VOCAB), size=mask.shape).astype("int32")
    ids[:, 0] = 2
    ids[np.arange(len(lengths)), np.array(lengths) - 1] = 3
    types = np.zeros_like(ids)
    types[0, 5:lengths[0]] = 1
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types}


def test_off_gives_bit_identical_outputs(encoder):
    x = batch()
    plain, off, on = encoder(x), encoder(x, attention_maps=False), encoder(x, attention_maps=True)
    assert set(off) == set(plain) and set(on) == set(plain) | {"attention_maps"}
    for out in (off, on):                               # maps on: the same layers, outside the functional graph
        for name in ("sequence_output", "pooled_output"):
            np.testing.assert_array_equal(np.asarray(out[name]), np.asarray(plain[name]))
        for a, b in zip(out["encoder_outputs"], plain["encoder_outputs"], strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_maps_shape_rows_and_padding(encoder):
    x = batch()
    maps = encoder(x, attention_maps=True)["attention_maps"]
    assert len(maps) == TINY.num_hidden_layers
    for m in maps:
        assert tuple(m.shape) == (3, TINY.num_attention_heads, 12, 12) and m.dtype == "float32"
        m = np.asarray(m)
        np.testing.assert_allclose(m.sum(-1), 1.0, atol=1e-5)                   # every query row, padding too
        padded_keys = np.broadcast_to(x["input_mask"][:, None, None, :] == 0, m.shape)
        assert m[padded_keys].max() < 1e-30                                     # exp(-10000) underflows to 0
        assert (m[~padded_keys] > 0).all()


def test_maps_are_the_softmax_of_each_blocks_scores(encoder):
    """Recomputed in NumPy from each block's input and its query/key weights, at the real query rows."""
    x = batch()
    out = encoder(x, attention_maps=True)
    inputs = [np.asarray(encoder.embeddings(x["input_word_ids"], x["input_type_ids"]))]
    inputs += [np.asarray(h) for h in out["encoder_outputs"][:-1]]
    n, d = TINY.num_attention_heads, TINY.hidden_size // TINY.num_attention_heads
    real = x["input_mask"].astype(bool)
    for block, h, got in zip(encoder.transformer_layers, inputs, out["attention_maps"], strict=True):
        heads = lambda dense: (h @ np.asarray(dense.kernel) + np.asarray(dense.bias)).reshape(3, 12, n, d)  # noqa
        scores = np.einsum("bqnd,bknd->bnqk", heads(block.query), heads(block.key)) / np.sqrt(d)
        scores = scores + np.where(real, 0.0, -10000.0)[:, None, None, :]
        want = np.exp(scores - scores.max(-1, keepdims=True))
        want /= want.sum(-1, keepdims=True)
        got = np.asarray(got)
        rows = np.broadcast_to(real[:, None, :, None], got.shape)
        np.testing.assert_allclose(got[rows], want[rows], atol=1e-5)


def test_maps_stay_float32_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        encoder = BertEncoder(TINY)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    maps = encoder(batch(), attention_maps=True)["attention_maps"]
    assert all(m.dtype == "float32" for m in maps)
    np.testing.assert_allclose(np.asarray(maps[0]).sum(-1), 1.0, atol=1e-5)


def test_block_returns_its_probabilities_only_when_asked(encoder):
    block, x = encoder.transformer_layers[0], batch()
    h = encoder.embeddings(x["input_word_ids"], x["input_type_ids"])
    plain = block(h, x["input_mask"])
    out, probs = block(h, x["input_mask"], return_attention=True)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(plain))
    assert tuple(probs.shape) == (3, 2, 12, 12)
    _, cls_probs = block(h, x["input_mask"], cls_only=True, return_attention=True)
    np.testing.assert_allclose(np.asarray(cls_probs)[:, :, 0], np.asarray(probs)[:, :, 0], atol=1e-6)


def test_symbolic_call_and_refused_combination(encoder):
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in KEYS}
    maps = encoder(inputs, attention_maps=True)["attention_maps"]
    assert [tuple(m.shape) for m in maps] == [(None, 2, None, None)] * 2
    with pytest.raises(ValueError, match="pooled_only and attention_maps"):
        encoder(batch(), pooled_only=True, attention_maps=True)


def test_one_texts_maps_without_padding(encoder, preprocessor):
    text = "The cat sat on the mat because it was tired."
    attentions, tokens = attention_maps(encoder, preprocessor, text)
    assert tokens == ["[CLS]", *text.lower().replace(".", " .").split(), "[SEP]"]
    assert attentions.shape == (2, 2, len(tokens), len(tokens)) and attentions.dtype == np.float32
    np.testing.assert_allclose(attentions.sum(-1), 1.0, atol=1e-5)
    # the same text padded in a batch beside a longer one: the same maps at its real pieces
    x = {k: np.asarray(v) for k, v in preprocessor([text, text + " a dog ran , a cat sat , a dog ran"]).items()}
    padded = np.stack([np.asarray(m)[0] for m in encoder(x, attention_maps=True)["attention_maps"]])
    p = len(tokens)
    np.testing.assert_allclose(attentions, padded[:, :, :p, :p], atol=1e-6)
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="no text"):
            attention_maps(encoder, preprocessor, bad)


def test_pictures_are_pngs(tmp_path):
    attentions = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3, 4)).astype("float32")
    tokens = ["[CLS]", "a", "dog", "[SEP]"]
    for path in (draw_heads(attentions, tokens, -1, str(tmp_path / "h.png")),
                 draw_overview(attentions, tokens, str(tmp_path / "o.png"))):
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(IndexError, match="layers 0 to 1"):
        draw_heads(attentions, tokens, 2, str(tmp_path / "x.png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.png", "o.png"]        # no partial files left


def test_command_writes_npz_and_pictures(tmp_path, vocab_file, capsys):
    model = ["--model", "bert_tiny", "--vocab", vocab_file]
    npz, png = tmp_path / "a.npz", tmp_path / "layer1.png"
    assert main(["attention", *model, "--npz", str(npz), "--out", str(png), "--layer", "1",
                 "the cat sat on the mat"]) == 0
    with np.load(npz) as f:                                         # no pickles: plain arrays
        attentions, tokens = f["attentions"], f["tokens"].tolist()
    assert tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    assert attentions.shape == (2, 2, 8, 8) and attentions.dtype == np.float32
    np.testing.assert_allclose(attentions.sum(-1), 1.0, atol=1e-5)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["attention", *model, "--npz", str(npz), "--out", str(tmp_path / "all.png"), "the", "dog"]) == 0
    assert (tmp_path / "all.png").read_bytes()[:4] == b"\x89PNG"
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--model", "bert_tiny", "  "], "no text"),
    (["--model", "no/such/model", "the cat"], "no/such/model"),
    (["--model", "bert_tiny", "--layer", "5", "the cat"], "--layer 5: this model's layers are 0 to 1"),
], ids=["empty-text", "missing-model", "no-such-layer"])
def test_command_refuses_bad_input_clearly(argv, message, tmp_path, vocab_file, capsys):
    npz = tmp_path / "a.npz"
    assert main(["attention", "--vocab", vocab_file, "--npz", str(npz), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bert-keras attention: error:") and message in err and "Traceback" not in err
    assert not npz.exists()
