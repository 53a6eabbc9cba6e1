"""The embedding and reranker losses (bert_keras/tasks/embedding_losses.py) against sentence-transformers 6.2's
own loss modules on the same fixed embeddings: each loss's value, and MultipleNegativesRankingLoss's gradient with
respect to the embeddings, within 1e-5 (torch tier: sentence-transformers and torch are the reference)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.tasks import embedding_losses as ours

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
st_losses = pytest.importorskip("sentence_transformers.sentence_transformer.losses")


def embeddings(rows: int, columns: int, seed: int = 0) -> np.ndarray:
    """[rows, columns, 16] embeddings whose pairs are partly similar (realistic losses, not all near log B)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(rows, 1, 16))
    return (base + 2.0 * rng.normal(size=(rows, columns, 16))).astype("float32")


def st_columns(e: np.ndarray) -> list:
    return [torch.tensor(e[:, c], requires_grad=True) for c in range(e.shape[1])]


@pytest.mark.parametrize("columns", [2, 3, 4])
def test_multiple_negatives_ranking_loss_value_and_gradient(columns):
    e = embeddings(6, columns)
    reference = st_losses.MultipleNegativesRankingLoss(None)             # scale 20, cos_sim, query_to_doc, joint
    tensors = st_columns(e)
    expected = reference.compute_loss_from_embeddings(tensors, torch.zeros(6))
    expected.backward()
    expected_gradient = np.stack([t.grad.numpy() for t in tensors], axis=1)
    variable = tf.Variable(e)
    with tf.GradientTape() as tape:
        loss = ours.multiple_negatives_ranking_loss(variable)
    gradient = tape.gradient(loss, variable).numpy()
    assert float(expected.detach()) > 0.5                       # a loss with something to learn, not a saturated one
    np.testing.assert_allclose(float(loss), float(expected), atol=1e-5, rtol=0)
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-5, rtol=0)
    # The Keras loss object gives the same value as the function (y_true ignored).
    np.testing.assert_allclose(float(ours.MultipleNegativesRankingLoss()(np.zeros(6), e)), float(expected),
                               atol=1e-5, rtol=0)


def test_multiple_negatives_ranking_loss_matches_the_cached_loss_of_sentence_transformers():
    e = embeddings(8, 3, seed=1)
    cached = st_losses.CachedMultipleNegativesRankingLoss.__new__(st_losses.CachedMultipleNegativesRankingLoss)
    torch.nn.Module.__init__(cached)
    cached.loss, cached.mini_batch_size, cached.show_progress_bar = st_losses.MultipleNegativesRankingLoss(None), 3, False
    reps = [list(torch.tensor(e[:, c]).split(3)) for c in range(3)]
    expected = cached.calculate_loss(reps)
    np.testing.assert_allclose(float(ours.multiple_negatives_ranking_loss(e)), float(expected), atol=1e-5, rtol=0)


@pytest.mark.parametrize("scale", [20.0, 7.0])
def test_cosent_loss(scale):
    e = embeddings(10, 2, seed=2)
    labels = np.array([0.2, 0.8, 0.8, 0.0, 1.0, 0.4, 0.6, 0.2, 0.9, 0.5], "float32")     # ties included
    expected = st_losses.CoSENTLoss(None, scale=scale).compute_loss_from_embeddings(
        st_columns(e), torch.tensor(labels))
    assert float(expected) > 1.0
    np.testing.assert_allclose(float(ours.cosent_loss(e, labels, scale)), float(expected), atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(float(ours.CoSENTLoss(scale)(labels, e)), float(expected), atol=1e-5, rtol=1e-6)


def test_cosine_similarity_loss():
    e = embeddings(10, 2, seed=3)
    labels = np.linspace(0, 1, 10).astype("float32")
    expected = st_losses.CosineSimilarityLoss(None).compute_loss_from_embeddings(st_columns(e), torch.tensor(labels))
    np.testing.assert_allclose(float(ours.cosine_similarity_loss(e, labels)), float(expected), atol=1e-6, rtol=0)
    np.testing.assert_allclose(float(ours.CosineSimilarityLoss()(labels, e)), float(expected), atol=1e-6, rtol=0)


def test_reranker_binary_cross_entropy():
    """sentence-transformers' BinaryCrossEntropyLoss applies its activation_fn (Identity by default) and then
    torch's BCEWithLogitsLoss (mean) to the logits [B]; the reranker task compiles Keras' from_logits BCE on the
    model's logits [B, 1] against scores [B], scored or 0/1."""
    import keras
    from bert_keras.finetune.embedding import RerankTask
    logits = np.random.default_rng(4).normal(scale=3, size=(12, 1)).astype("float32")
    labels = np.array([0, 1, 1, 0, 0.3, 0.7, 1, 0, 0.5, 1, 0, 0.9], "float32")
    expected = torch.nn.BCEWithLogitsLoss()(torch.tensor(logits[:, 0]), torch.tensor(labels))
    loss = RerankTask("rerank").compile_args()["loss"]
    assert isinstance(loss, keras.losses.BinaryCrossentropy)
    np.testing.assert_allclose(float(loss(labels, logits)), float(expected), atol=1e-6, rtol=0)
