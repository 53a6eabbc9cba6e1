"""Embedding evaluation with sentence-transformers' evaluators' definitions, in NumPy.

STS (EmbeddingSimilarityEvaluator): the cosine similarity of each pair's embeddings against the gold score,
Spearman's rank correlation (average ranks for ties, as scipy.stats.spearmanr) and Pearson's.
Retrieval (InformationRetrievalEvaluator): each query's corpus documents by cosine similarity, best first, ties by
ascending corpus index; with binary relevance:
  accuracy@k   a relevant document among the top k
  precision@k  relevant documents in the top k / k;  recall@k: / the query's relevant documents
  MRR@k        1 / rank of the first relevant document in the top k (0 if none)
  nDCG@k       sum over the top k of rel_i / log2(i + 2), / the same for the ideal order
  MAP@k        sum of precision at each relevant hit in the top k / min(k, relevant documents)
each averaged over the queries. Scores are computed in chunks of the corpus, so memory stays bounded
(`top_k_cosine`).
"""

from __future__ import annotations

import numpy as np

ACCURACY_AT, PRECISION_RECALL_AT, MRR_AT, NDCG_AT, MAP_AT = (1, 3, 5, 10), (1, 3, 5, 10), (10,), (10,), (100,)


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank (scipy.stats.rankdata's 'average')."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    starts = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], len(x)] - 1
    ranks = np.empty(len(x), np.float64)
    ranks[order] = (first[group] + last[group]) / 2.0 + 1.0
    return ranks


def pearson(x, y) -> float:
    """Pearson's correlation of two equal-length sequences."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


def spearman(x, y) -> float:
    """Spearman's rank correlation (Pearson's on average ranks), as scipy.stats.spearmanr.

    Example:
        >>> round(spearman([1, 2, 3, 4], [10, 20, 20, 40]), 4)
        0.9487
    """
    return pearson(_ranks(np.asarray(x, np.float64)), _ranks(np.asarray(y, np.float64)))


def _unit(x) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def sts_scores(embeddings1, embeddings2, gold) -> dict:
    """STS Benchmark's figures for pairs of embeddings: {"spearman_cosine", "pearson_cosine"}.

    Args:
        embeddings1, embeddings2: arrays [N, D], the pairs' two sides.
        gold: [N] gold similarity scores (any scale: only ranks and linear correlation matter).

    Returns:
        dict of float.

    Example:
        >>> e = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
        >>> sts_scores(e, np.array([[1.0, 0.0]] * 3), [5.0, 2.5, 0.0])["spearman_cosine"]
        1.0
    """
    cosine = (_unit(embeddings1) * _unit(embeddings2)).sum(-1)
    return {"spearman_cosine": spearman(gold, cosine), "pearson_cosine": pearson(gold, cosine)}


def top_k_cosine(queries, corpus, k: int, chunk: int = 50_000):
    """The k best corpus rows by cosine similarity for every query, the corpus read `chunk` rows at a time.

    Args:
        queries: [Q, D] array. corpus: [N, D] array (or a sequence of [n, D] chunks, read once).
        k: int. How many per query.
        chunk: int. Corpus rows scored at once (memory: Q x (chunk + k) floats).

    Returns:
        (indices [Q, k'] int64, scores [Q, k'] float32), k' = min(k, N); best first, ties by ascending index.

    Example:
        >>> top_k_cosine(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]]), 2)[0].tolist()
        [[1, 2]]
    """
    queries = _unit(queries)
    chunks = [corpus[i:i + chunk] for i in range(0, len(corpus), chunk)] if isinstance(corpus, np.ndarray) \
        else corpus
    best_i = np.zeros([len(queries), 0], np.int64)
    best_s = np.zeros([len(queries), 0], np.float32)
    offset = 0
    for part in chunks:
        scores = queries @ _unit(part).T
        index = np.broadcast_to(np.arange(offset, offset + len(part)), scores.shape)
        offset += len(part)
        all_s, all_i = np.concatenate([best_s, scores], 1), np.concatenate([best_i, index], 1)
        order = np.lexsort((all_i, -all_s), axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(all_s, order, 1), np.take_along_axis(all_i, order, 1)
    return best_i, best_s


def retrieval_scores(query_embeddings, corpus_embeddings, relevant) -> dict:
    """InformationRetrievalEvaluator's figures: accuracy@k, precision@k, recall@k, mrr@10, ndcg@10, map@100.

    Args:
        query_embeddings: [Q, D]. corpus_embeddings: [N, D].
        relevant: Q sets (or lists) of corpus indices: each query's relevant documents (at least one).

    Returns:
        dict {"accuracy@1": ..., "ndcg@10": ..., ...} of floats, averaged over the queries.

    Example:
        >>> q = np.array([[1.0, 0.0], [0.0, 1.0]]); c = np.array([[1.0, 0.1], [0.1, 1.0]])
        >>> retrieval_scores(q, c, [{0}, {0}])["mrr@10"]
        0.75
    """
    relevant = [set(r) for r in relevant]
    if any(not r for r in relevant):
        raise ValueError("a query without a relevant document: every query needs at least one")
    k_max = max(ACCURACY_AT + PRECISION_RECALL_AT + MRR_AT + NDCG_AT + MAP_AT)
    top, _ = top_k_cosine(query_embeddings, corpus_embeddings, k_max)
    out: dict[str, list] = {}
    for hits, rel in zip(top.tolist(), relevant):
        found = [1 if h in rel else 0 for h in hits]
        for k in ACCURACY_AT:
            out.setdefault(f"accuracy@{k}", []).append(float(any(found[:k])))
        for k in PRECISION_RECALL_AT:
            out.setdefault(f"precision@{k}", []).append(sum(found[:k]) / k)
            out.setdefault(f"recall@{k}", []).append(sum(found[:k]) / len(rel))
        for k in MRR_AT:
            first = next((i for i, f in enumerate(found[:k]) if f), None)
            out.setdefault(f"mrr@{k}", []).append(0.0 if first is None else 1.0 / (first + 1))
        for k in NDCG_AT:
            dcg = sum(f / np.log2(i + 2) for i, f in enumerate(found[:k]))
            ideal = sum(1 / np.log2(i + 2) for i in range(min(len(rel), k)))
            out.setdefault(f"ndcg@{k}", []).append(dcg / ideal)
        for k in MAP_AT:
            correct, total = 0, 0.0
            for i, f in enumerate(found[:k]):
                if f:
                    correct += 1
                    total += correct / (i + 1)
            out.setdefault(f"map@{k}", []).append(total / min(k, len(rel)))
    return {name: float(np.mean(values)) for name, values in out.items()}
