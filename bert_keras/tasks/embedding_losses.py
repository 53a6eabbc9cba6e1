"""Losses for fine-tuning sentence embeddings and rerankers, as sentence-transformers 6.2 defines them.

In `keras.ops`, so the same losses train on TensorFlow and JAX. An embedding batch is `y_pred` [B, C, D]: the
embeddings of C columns per row (anchor, positive, then any hard negatives; or the two texts of a scored pair).

  MultipleNegativesRankingLoss   sentence-transformers' default ("query_to_doc", joint): each anchor against every
                                 positive of the batch and then every hard negative (the candidates' columns
                                 concatenated, positives first), cosine similarity times `scale` (20), cross-entropy
                                 with the anchor's own positive as the label, the mean over the anchors. Not
                                 symmetric, no anchor-anchor terms (6.2's defaults).
  CoSENTLoss                     log(1 + sum over pairs (i, j) with label_i < label_j of exp(scale * (cos_i - cos_j))),
                                 scale 20.
  CosineSimilarityLoss           mean squared error of cos(a, b) and the label.
  binary cross-entropy           rerankers: keras.losses.BinaryCrossentropy(from_logits=True) on the logit, as
                                 sentence-transformers' BinaryCrossEntropyLoss (torch's BCEWithLogitsLoss, mean).

In-batch negatives over several devices: on JAX, Keras' DataParallel runs the loss on the global batch (one array
sharded over the devices: XLA gathers the candidates the similarity matrix needs), so the negatives are the whole
global batch's by construction (tests/on_jax/test_embedding_loss_gather.py). Under a TensorFlow strategy with
several replicas each replica holds its own rows: `global_candidates` gathers the candidates from every replica
(with their gradients), as sentence-transformers' `gather_across_devices=True`.
"""

from __future__ import annotations

import keras
from keras import ops


def normalize(x):
    """x / max(||x||, 1e-12) on the last axis (torch's F.normalize, sentence-transformers' normalize_embeddings)."""
    x = ops.cast(x, "float32")
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)), 1e-12)


def cosine_matrix(a, b):
    """Cosine similarity of every row of a [N, D] with every row of b [M, D] -> [N, M] (sentence-transformers'
    cos_sim)."""
    return ops.matmul(normalize(a), ops.transpose(normalize(b)))


def pairwise_cosine(a, b):
    """cos(a[i], b[i]) -> [N] (sentence-transformers' pairwise_cos_sim)."""
    return ops.sum(normalize(a) * normalize(b), axis=-1)


def global_candidates(candidates):
    """Candidates [N, D] of this replica -> (the candidates of every replica in replica order, this replica's first
    row in them): under a TensorFlow strategy with several replicas, an all-gather with gradients; anywhere else
    (one device, or JAX, whose step sees the global batch) the candidates themselves and 0."""
    if keras.backend.backend() != "tensorflow":
        return candidates, 0
    import tensorflow as tf
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return candidates, 0
    rows = tf.shape(candidates)[0]
    return context.all_gather(candidates, axis=0), context.replica_id_in_sync_group * rows


def multiple_negatives_ranking_loss(embeddings, scale: float = 20.0):
    """sentence-transformers' MultipleNegativesRankingLoss (6.2's defaults) on embeddings [B, C, D].

    Args:
        embeddings: [B, C, D]: column 0 the anchors, column 1 their positives, columns 2.. hard negatives.
        scale: the cosine similarities' multiplier (1 / temperature).

    Returns:
        The scalar loss: the mean over the anchors of -log softmax(scale * cos(anchor, candidates))[own positive].

    Example:
        >>> e = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]], "float32")
        >>> round(float(multiple_negatives_ranking_loss(e)), 6)
        0.0
    """
    embeddings = ops.cast(embeddings, "float32")
    anchors = embeddings[:, 0]
    # Candidates: every positive, then every first hard negative, ... (sentence-transformers' torch.cat(docs)),
    # from every replica under a TensorFlow strategy; this replica's own positives start at `offset`.
    gathered = [global_candidates(embeddings[:, c]) for c in range(1, embeddings.shape[1])]
    candidates, offset = ops.concatenate([g for g, _ in gathered], axis=0), gathered[0][1]
    scores = cosine_matrix(anchors, candidates) * scale                           # [B, B_global * (C-1)]
    own = _own_scores(scores, offset)
    return ops.mean(ops.logsumexp(scores, axis=1) - own)


def _own_scores(scores, offset):
    """scores[i, offset + i]: each anchor's score with its own positive, read from the matrix (as
    sentence-transformers indexes it)."""
    rows = ops.shape(scores)[0]
    index = ops.expand_dims(ops.arange(rows) + offset, 1)
    return ops.squeeze(ops.take_along_axis(scores, ops.cast(index, "int32"), axis=1), 1)


def cosent_loss(embeddings, labels, scale: float = 20.0):
    """sentence-transformers' CoSENTLoss on pairs' embeddings [B, 2, D] and their scores [B].

    Args:
        embeddings: [B, 2, D]: the two texts of each pair.
        labels: [B] scores (any scale: only their order counts).
        scale: the cosine similarities' multiplier.

    Returns:
        log(1 + sum over (i, j) with labels[i] < labels[j] of exp(scale * (cos_i - cos_j))).

    Example:
        >>> e = np.array([[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]], "float32")
        >>> round(float(cosent_loss(e, np.array([1.0, 0.0]))), 6)       # the ranking is right: log(1 + e^-20)
        0.0
    """
    embeddings = ops.cast(embeddings, "float32")
    labels = ops.reshape(ops.cast(labels, "float32"), (-1,))
    scores = pairwise_cosine(embeddings[:, 0], embeddings[:, 1]) * scale
    differences = ops.expand_dims(scores, 1) - ops.expand_dims(scores, 0)          # s_i - s_j
    lower = ops.cast(ops.expand_dims(labels, 1) < ops.expand_dims(labels, 0), "float32")
    differences = differences - (1.0 - lower) * 1e12
    flat = ops.concatenate([ops.zeros((1,), "float32"), ops.reshape(differences, (-1,))], axis=0)
    return ops.logsumexp(flat)


def cosine_similarity_loss(embeddings, labels):
    """sentence-transformers' CosineSimilarityLoss: mean((cos(a, b) - label)^2) on pairs [B, 2, D], labels [B].

    Example:
        >>> e = np.array([[[1.0, 0.0], [0.0, 1.0]]], "float32")
        >>> float(cosine_similarity_loss(e, np.array([1.0])))
        1.0
    """
    embeddings = ops.cast(embeddings, "float32")
    labels = ops.reshape(ops.cast(labels, "float32"), (-1,))
    return ops.mean(ops.square(pairwise_cosine(embeddings[:, 0], embeddings[:, 1]) - labels))


@keras.saving.register_keras_serializable(package="bert_keras")
class MultipleNegativesRankingLoss(keras.losses.Loss):
    """`multiple_negatives_ranking_loss` as a Keras loss: y_pred [B, C, D] embeddings, y_true ignored.

    Args:
        scale: float. The cosine similarities' multiplier (sentence-transformers' 20).
        name: str. The loss's name.

    Example:
        >>> loss = MultipleNegativesRankingLoss()
        >>> float(loss(np.zeros([2]), np.eye(2, dtype="float32")[:, None].repeat(2, 1))) < 1e-6
        True
    """

    def __init__(self, scale: float = 20.0, name: str = "multiple_negatives_ranking_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)

    def call(self, y_true, y_pred):
        return multiple_negatives_ranking_loss(y_pred, self.scale)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="bert_keras")
class CoSENTLoss(keras.losses.Loss):
    """`cosent_loss` as a Keras loss: y_pred [B, 2, D] embeddings, y_true [B] scores.

    Args:
        scale: float. The cosine similarities' multiplier (sentence-transformers' 20).
        name: str. The loss's name.

    Example:
        >>> e = np.array([[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]], "float32")
        >>> float(CoSENTLoss()(np.array([0.0, 1.0]), e)) > 19     # the wrong order: about 20
        True
    """

    def __init__(self, scale: float = 20.0, name: str = "cosent_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)

    def call(self, y_true, y_pred):
        return cosent_loss(y_pred, y_true, self.scale)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="bert_keras")
class CosineSimilarityLoss(keras.losses.Loss):
    """`cosine_similarity_loss` as a Keras loss: y_pred [B, 2, D] embeddings, y_true [B] scores in [0, 1].

    Args:
        name: str. The loss's name.

    Example:
        >>> float(CosineSimilarityLoss()(np.array([1.0]), np.array([[[1.0, 0.0], [0.0, 1.0]]], "float32")))
        1.0
    """

    def __init__(self, name: str = "cosine_similarity_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return cosine_similarity_loss(y_pred, y_true)


EMBEDDING_LOSSES = {"mnrl": MultipleNegativesRankingLoss, "cached-mnrl": MultipleNegativesRankingLoss,
                    "cosent": CoSENTLoss, "cosine": CosineSimilarityLoss}
