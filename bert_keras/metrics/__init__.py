"""Evaluation metrics in plain numpy/python (no TensorFlow): SQuAD v1.1/v2.0, GLUE, entity-level tagging."""

from bert_keras.metrics.glue import (
    accuracy,
    binary_f1,
    glue_metrics,
    matthews_corrcoef,
    pearson,
    spearman,
)
from bert_keras.metrics.squad import normalize_answer, squad_v1_scores, squad_v2_scores
from bert_keras.metrics.tagging import classification_report, get_entities, precision_recall_f1

__all__ = [
    "accuracy",
    "binary_f1",
    "classification_report",
    "get_entities",
    "glue_metrics",
    "matthews_corrcoef",
    "normalize_answer",
    "pearson",
    "precision_recall_f1",
    "spearman",
    "squad_v1_scores",
    "squad_v2_scores",
]
