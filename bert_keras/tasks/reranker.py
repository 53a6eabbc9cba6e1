"""Rerankers: a cross-encoder scores a (query, passage) pair; sentence-transformers' `CrossEncoder` as a task model.

A CrossEncoder is a one-label BertForSequenceClassification over the pair with an activation on its logit
(sigmoid by default): here a BertClassifier with `segments=2`, `num_classes=1` and `score_activation`, so it
shares the classifier's head, export and fine-tuning. `predict(pairs)` and `rank(query, passages, top_k)` answer as
sentence-transformers 6.2's CrossEncoder does. Read a CrossEncoder folder with
tasks.sentence_transformers.load_sentence_transformer.
"""

from __future__ import annotations

import keras
import numpy as np

from bert_keras.tasks.base import is_text
from bert_keras.tasks.classifier import BertClassifier


@keras.saving.register_keras_serializable(package="bert_keras")
class BertReranker(BertClassifier):
    """A cross-encoder reranker: one score per (query, passage) pair, after `score_activation`.

    Args:
        encoder: BertEncoder. The backbone.
        score_activation: str. "sigmoid" (a CrossEncoder's default for one label) or "identity" (the logit).
        dropout: float. Dropout before the head, in training.
        preprocessor: BertPreprocessor or None. Needed for raw text.
        name: str or None. The Keras model name.
        **kwargs: the classifier's `num_classes` (1) and `segments` (2), as a saved config holds them.

    Inputs and outputs:
        The id dict of pairs [B, S] -> logits [B, 1] float32. Raw text: (queries [B], passages [B]).

    Example:
        >>> model = bert_keras.tasks.BertReranker(bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")),
        ...                                       preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> len(model.predict([("a query", "a passage"), ("a query", "another")]))
        2
        >>> sorted(model.rank("a query", ["one", "two", "three"], top_k=2)[0])
        ['corpus_id', 'score']
    """

    def __init__(self, encoder, *, score_activation: str = "sigmoid", dropout: float = 0.1, preprocessor=None,
                 name=None, **kwargs):
        if kwargs.get("num_classes", 1) != 1 or kwargs.get("segments", 2) != 2 or kwargs.get("multi_label"):
            raise ValueError("a reranker scores pairs with one output: num_classes=1, segments=2")
        super().__init__(encoder, 1, dropout=dropout, preprocessor=preprocessor, segments=2,
                         score_activation=score_activation or "identity", name=name,
                         label_names=kwargs.get("label_names"))

    def predict(self, x, batch_size=None, **kwargs):
        """A list of (query, passage) pairs -> NumPy scores [N] after the activation (CrossEncoder.predict);
        anything else (ids, a (queries, passages) tuple of arrays, a dataset) -> Keras' predict (logits)."""
        if isinstance(x, list) and x and all(isinstance(p, (tuple, list)) and len(p) == 2 and is_text(list(p))
                                             for p in x):
            return self.scores([p[0] for p in x], [p[1] for p in x], batch_size=batch_size)
        return super().predict(x, batch_size=batch_size, **kwargs)

    def scores(self, queries, passages, batch_size=None) -> np.ndarray:
        """Scores [N] of the pairs (queries[i], passages[i]), after the activation."""
        parts = [out["score"] for out in self.serve_batches(list(queries), list(passages), batch_size=batch_size)]
        return np.concatenate(parts).astype("float32") if parts else np.zeros([0], "float32")

    def rank(self, query: str, documents, top_k: int | None = None, return_documents: bool = False,
             batch_size: int | None = None) -> list[dict]:
        """Ranks documents for a query by score, as CrossEncoder.rank.

        Args:
            query: str.
            documents: list of str.
            top_k: int or None. Keep the best k (None: all).
            return_documents: bool. Add each document's "text".
            batch_size: int or None. Pairs per traced call.

        Returns:
            list of {"corpus_id": index into documents, "score": float (, "text")}, best first.

        Example:
            >>> model.rank("who wrote it?", ["Ada wrote it.", "It rained."], top_k=1)   # doctest: +SKIP
            [{'corpus_id': 0, 'score': 0.98}]
        """
        documents = list(documents)
        scores = self.scores([query] * len(documents), documents, batch_size=batch_size)
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [{"corpus_id": int(i), "score": float(scores[i]), **({"text": documents[i]} if return_documents
                                                                      else {})} for i in order]
