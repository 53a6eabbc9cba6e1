"""`finetune --task embedding` and `--task rerank`: sentence embeddings and cross-encoder rerankers, trained as
sentence-transformers trains them.

embedding   rows (anchor, positive[, negative...]) or scored pairs (sentence1, sentence2, score), from JSONL, TSV or
            the STS Benchmark's csv (data/pairs.py). Loss (`loss`): "mnrl" (MultipleNegativesRankingLoss, in-batch
            negatives, the default for rows), "cached-mnrl" (the same with GradCache, `mini_batch_size` rows at a
            time), "cosent" (the default for scored pairs) or "cosine" (CosineSimilarityLoss):
            tasks/embedding_losses.py. The model: a BertEmbedder over the encoder with `pooling` (mean by
            default), or a sentence-transformers folder's own modules (pooling, Dense, Normalize, prompts) when
            --model is one. Metric: spearman_cosine on scored pairs (EmbeddingSimilarityEvaluator's); ndcg@10 on
            rows, each anchor against every distinct positive and negative text of the evaluation file, its own
            positive the relevant one (InformationRetrievalEvaluator's figures).
rerank      scored or 0/1 pairs (query, passage, score in [0, 1]): a BertReranker trained with binary cross-entropy
            on its logit (sentence-transformers' BinaryCrossEntropyLoss). Metric: spearman of the scores.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_keras.backends import on_tensorflow, pad_batch_lengths
from bert_keras.data.errors import DataFormatError
from bert_keras.data.pairs import read_text_rows
from bert_keras.finetune.base import Task, some_examples
from bert_keras.tasks.embedding_losses import EMBEDDING_LOSSES

SCORED_LOSSES = ("cosent", "cosine")


class EmbeddingTask(Task):
    """Sentence-embedding fine-tuning (see the module docstring).

    Args:
        name: str. The --task name ("embedding").
        loss: str or None. "mnrl", "cached-mnrl", "cosent" or "cosine"; None: mnrl for rows, cosent for scored pairs.
        pooling: str. The pooling of a new BertEmbedder (sentence_pooling.MODES); a sentence-transformers folder
            keeps its own.
        mini_batch_size: int. Rows per mini-batch of cached-mnrl.

    Example:
        >>> from bert_keras.finetune.registry import get_task
        >>> get_task("embedding", loss="cosent").metric_name
        'spearman_cosine'
    """

    uses_pooler = False
    segments = 1
    default_files = ("train.jsonl", "dev.jsonl")

    def __init__(self, name: str, loss: str | None = None, pooling: str = "mean", mini_batch_size: int = 32):
        if loss is not None and loss not in EMBEDDING_LOSSES:
            raise ValueError(f"--loss {loss}: give one of {', '.join(EMBEDDING_LOSSES)}")
        if mini_batch_size < 1:
            raise ValueError(f"--mini-batch-size {mini_batch_size}: give a positive number of rows")
        self.name, self.loss, self.pooling, self.mini_batch_size = name, loss, pooling, mini_batch_size
        self.metric_name = "spearman_cosine" if loss in SCORED_LOSSES else "ndcg@10"

    def read(self, path):
        rows, columns = read_text_rows(path)
        rows = some_examples(rows, path, "no rows")
        scored = rows[0].score is not None
        if self.loss is None:
            self.loss = "cosent" if scored else "mnrl"
        if self.loss in SCORED_LOSSES and (not scored or len(rows[0].texts) != 2):
            raise DataFormatError(path, None, f"{self.loss} trains on scored pairs (sentence1, sentence2, score), "
                                              f"and this file's columns are {', '.join(columns)}: give scored pairs, "
                                              "or --loss mnrl for (anchor, positive[, negative]) rows")
        if self.loss not in SCORED_LOSSES and scored:
            raise DataFormatError(path, None, f"--loss {self.loss} takes (anchor, positive[, negative]) rows, and "
                                              "this file's pairs are scored: train them with --loss cosent or cosine")
        self.metric_name = "spearman_cosine" if scored else "ndcg@10"
        return rows

    def build_model(self, encoder, preprocessor, examples):
        from bert_keras.finetune.embedding_model import EmbeddingTrainingModel
        from bert_keras.tasks import BertEmbedder
        if self.loss == "cached-mnrl" and not on_tensorflow():
            raise ValueError("--loss cached-mnrl (GradCache) trains on TensorFlow in this version: use --loss mnrl "
                             "on JAX (its in-batch negatives span the devices' whole batch), or --backend tensorflow")
        return EmbeddingTrainingModel(BertEmbedder(encoder, pooling=self.pooling, preprocessor=preprocessor),
                                      self.mini_batch_size if self.loss == "cached-mnrl" else None)

    def inputs(self, examples):
        texts = np.array([list(e.texts) for e in examples], object).astype(str)
        return texts, np.array([e.score if e.score is not None else 0.0 for e in examples], "float32")

    def compile_args(self):
        return {"loss": EMBEDDING_LOSSES[self.loss or "mnrl"](), "metrics": []}

    def dataset(self, examples, model, batch_size, training, seed=0, drop_remainder=None):
        """Batches of (ids [B, C, S], scores [B]): every column of a row tokenized on its own, on the host."""
        pre = model.preprocessor
        drop = training if drop_remainder is None else drop_remainder
        model.max_rows = max(model.max_rows or 0, batch_size)
        ds = tf.data.Dataset.from_tensor_slices(self.inputs(examples))
        if training:
            ds = ds.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
        ds = ds.batch(batch_size, drop_remainder=drop).map(
            tf.autograph.experimental.do_not_convert(lambda x, y: (pre(x), y)), num_parallel_calls=tf.data.AUTOTUNE)
        if not on_tensorflow() and pre.seq_length is None:          # a few static shapes for XLA (backends.py)
            ds = pad_batch_lengths(ds, pre.pad_id, pre.max_seq_length)
        return ds.prefetch(tf.data.AUTOTUNE)

    def evaluate(self, model, examples, batch_size):
        from bert_keras.metrics.embeddings import retrieval_scores, sts_scores
        embedder = getattr(model, "embedder", model)
        if examples[0].score is not None:
            first = embedder.encode([e.texts[0] for e in examples], batch_size=batch_size)
            second = embedder.encode([e.texts[1] for e in examples], batch_size=batch_size)
            return sts_scores(first, second, [e.score for e in examples])
        corpus = list(dict.fromkeys(t for e in examples for t in e.texts[1:]))
        where = {t: i for i, t in enumerate(corpus)}
        queries = embedder.encode([e.texts[0] for e in examples], batch_size=batch_size)
        documents = embedder.encode(corpus, batch_size=batch_size)
        scores = retrieval_scores(queries, documents, [{where[e.texts[1]]} for e in examples])
        return {k: scores[k] for k in ("ndcg@10", "mrr@10", "accuracy@1", "recall@10")}


class RerankTask(Task):
    """Cross-encoder reranker fine-tuning on scored or 0/1 pairs with binary cross-entropy (module docstring).

    Args:
        name: str. The --task name ("rerank").

    Example:
        >>> from bert_keras.finetune.registry import get_task
        >>> get_task("rerank").metric_name
        'spearman'
    """

    metric_name = "spearman"
    segments = 2
    default_files = ("train.jsonl", "dev.jsonl")

    def __init__(self, name: str):
        self.name = name

    def read(self, path):
        rows, columns = read_text_rows(path)
        rows = some_examples(rows, path, "no rows")
        if rows[0].score is None or len(rows[0].texts) != 2:
            raise DataFormatError(path, None, f"a reranker trains on scored pairs (query, passage, score), and this "
                                              f"file's columns are {', '.join(columns)}: add a score (or label) "
                                              "column, 1 for a relevant passage and 0 for another")
        outside = [r.score for r in rows if not 0.0 <= r.score <= 1.0]
        if outside:
            raise DataFormatError(path, None, f"{len(outside)} scores outside [0, 1] (e.g. {outside[0]:g}): binary "
                                              "cross-entropy takes 0/1 labels or scores scaled to [0, 1]")
        return rows

    def build_model(self, encoder, preprocessor, examples):
        from bert_keras.tasks import BertReranker
        return BertReranker(encoder, preprocessor=preprocessor)

    def inputs(self, examples):
        x = (np.array([e.texts[0] for e in examples], object).astype(str),
             np.array([e.texts[1] for e in examples], object).astype(str))
        return x, np.array([e.score for e in examples], "float32")

    def compile_args(self):
        return {"loss": keras.losses.BinaryCrossentropy(from_logits=True), "metrics": []}

    def evaluate(self, model, examples, batch_size):
        from bert_keras.metrics.embeddings import spearman
        x = self.inputs(examples)[0]
        scores = model.scores(list(x[0]), list(x[1]), batch_size=batch_size)
        return {"spearman": spearman([e.score for e in examples], scores)}
