"""BertEmbedder and its pooling (unit tier). The pooling is checked against a NumPy transcription of
sentence-transformers 6.2's Pooling._forward_padded (written from its source, independent of keras.ops); the
exactness against sentence-transformers itself is tests/tasks/test_embedder_torch.py."""

import keras
import numpy as np
import pytest

from bert_keras import BertEncoder, BertPreprocessor, preset_config
from bert_keras.sentence_pooling import MODES, SentencePooling
from bert_keras.tasks import BertEmbedder, load_task_model


def reference_pooling(tokens, mask, mode, prompt_length=0):
    """sentence-transformers' Pooling on right-padded rows, in NumPy (float64)."""
    mask = mask.astype(np.float64).copy()
    if prompt_length:
        mask[:, :prompt_length] = 0
    m = mask[:, :, None]
    if mode == "cls":
        return tokens[np.arange(len(tokens)), mask.argmax(1)]
    if mode == "max":
        return np.where(m > 0, tokens, -np.inf).max(1)
    if mode in ("mean", "mean_sqrt_len_tokens"):
        count = np.clip(m.sum(1), 1e-9, None)
        return (tokens * m).sum(1) / (count if mode == "mean" else np.sqrt(count))
    weights = m * np.arange(1, tokens.shape[1] + 1)[None, :, None]
    return (tokens * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prompt_length", [0, 3])
def test_each_mode_equals_sentence_transformers_definition(mode, prompt_length):
    rng = np.random.default_rng(0)
    tokens = rng.normal(size=(4, 9, 6)).astype("float32")
    mask = np.array([[1] * 9, [1] * 5 + [0] * 4, [1] * 4 + [0] * 5, [1] * 2 + [0] * 7])
    tokens = tokens * mask[:, :, None]                          # the encoder's zeros at padding
    got = np.asarray(SentencePooling(mode, include_prompt=not prompt_length)(
        tokens, mask, prompt_length=prompt_length if prompt_length else None))
    want = reference_pooling(tokens.astype(np.float64), mask, mode, prompt_length)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], atol=1e-5)
    assert (np.isfinite(got) == finite).all()                   # max over no kept token: -inf in both


def test_modes_concatenate_in_order():
    tokens = np.random.default_rng(1).normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])
    got = np.asarray(SentencePooling(["cls", "mean"])(tokens, mask))
    np.testing.assert_allclose(got, np.concatenate([reference_pooling(tokens, mask, "cls"),
                                                    reference_pooling(tokens, mask, "mean")], -1), atol=1e-6)


def test_unknown_modes_are_refused_by_name():
    with pytest.raises(ValueError, match="lasttoken"):
        SentencePooling("lasttoken")


@pytest.fixture(scope="module")
def embedder(minilm_vocab):
    keras.utils.set_random_seed(0)
    return BertEmbedder(BertEncoder(preset_config("bert_tiny")), pooling=["cls", "mean"],
                        dense=[{"units": 16, "activation": "tanh"}], normalize=True,
                        prompts={"query": "query: ", "passage": "passage: "}, default_prompt_name="passage",
                        preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=32))


def test_encode_shapes_prompts_and_unit_length(embedder):
    one = embedder.encode("a fine film")
    many = embedder.encode(["a fine film", "", "x " * 100])
    assert one.shape == (16,) and many.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(many, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(one, many[0], atol=1e-6)
    # The default prompt ("passage: ") is applied unless another is named, as sentence-transformers does.
    np.testing.assert_allclose(embedder.encode(["passage: a fine film"], prompt=""), many[:1], atol=1e-6)
    np.testing.assert_allclose(embedder.encode(["query: a fine film"], prompt=""),
                               embedder.encode(["a fine film"], prompt_name="query"), atol=1e-6)
    with pytest.raises(ValueError, match="not among the model's prompts"):
        embedder.encode(["x"], prompt_name="document")


def test_similarity_definitions(embedder):
    a, b = np.array([[3.0, 4.0]]), np.array([[3.0, 4.0], [0.0, 1.0]])
    np.testing.assert_allclose(embedder.similarity(a, b), [[1.0, 0.8]], atol=1e-6)


def test_one_keras_file_with_safe_mode(embedder, tmp_path):
    embedder.save(tmp_path / "e.keras")
    loaded = keras.models.load_model(tmp_path / "e.keras", safe_mode=True)
    assert isinstance(loaded, BertEmbedder) and loaded.prompts == embedder.prompts
    np.testing.assert_allclose(loaded.encode(["a fine film"], prompt_name="query"),
                               embedder.encode(["a fine film"], prompt_name="query"), atol=1e-6)
    assert isinstance(load_task_model(str(tmp_path / "e.keras")), BertEmbedder)
