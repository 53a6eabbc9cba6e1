"""GLUE metrics in numpy: accuracy, binary F1, Matthews correlation, Pearson, Spearman.

Conventions (matching scikit-learn / scipy):

* ``binary_f1``: positive class 1; 0.0 when undefined (no positive label and no positive
  prediction, or no true positive), like ``sklearn.metrics.f1_score(zero_division=0)``.
* ``matthews_corrcoef``: the multi-class (Gorodkin) form used by scikit-learn; 0.0 when either
  the labels or the predictions are constant.
* ``pearson`` / ``spearman``: ``nan`` when either input is constant (as scipy); Spearman ranks
  ties by their average rank.

``glue_metrics(task, labels, predictions)`` returns the GLUE-standard set for a task:

=================  ======================================
task               keys
=================  ======================================
cola               matthews_corrcoef
sst-2              accuracy
mrpc, qqp          accuracy, f1
sts-b              pearson, spearman
mnli(-mm), qnli,   accuracy
rte, wnli, ax
=================  ======================================
"""

from __future__ import annotations

import numpy as np


def _pair(labels, predictions, dtype=None):
    y = np.asarray(labels, dtype=dtype)
    p = np.asarray(predictions, dtype=dtype)
    if y.ndim != 1 or p.shape != y.shape:
        raise ValueError(f"labels and predictions must be 1-D of the same length, got {y.shape} and {p.shape}")
    if y.size == 0:
        raise ValueError("labels and predictions are empty")
    return y, p


def accuracy(labels, predictions) -> float:
    """The fraction of predictions equal to their labels."""
    y, p = _pair(labels, predictions)
    return float(np.mean(y == p))


def binary_f1(labels, predictions, positive=1) -> float:
    """F1 of the `positive` class (MRPC, QQP), as sklearn's f1_score; 0.0 with no true positive."""
    y, p = _pair(labels, predictions)
    tp = int(np.sum((y == positive) & (p == positive)))
    fp = int(np.sum((y != positive) & (p == positive)))
    fn = int(np.sum((y == positive) & (p != positive)))
    return 0.0 if tp == 0 else 2.0 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation (CoLA's metric), multi-class, as sklearn's matthews_corrcoef; 0.0 when undefined."""
    y, p = _pair(labels, predictions)
    classes, inverse = np.unique(np.concatenate([y, p]), return_inverse=True)
    k = len(classes)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (inverse[: y.size], inverse[y.size:]), 1)
    t = confusion.sum(axis=1)  # true counts per class
    q = confusion.sum(axis=0)  # predicted counts per class
    c = np.trace(confusion)
    s = confusion.sum()
    cov_yp = c * s - t @ q
    cov_pp = s * s - q @ q
    cov_yy = s * s - t @ t
    if cov_pp * cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_yy * cov_pp))


def pearson(x, y) -> float:
    """Pearson correlation of two score lists (STS-B), as scipy.stats.pearsonr's statistic."""
    a, b = _pair(x, y, dtype=np.float64)
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a @ a) * (b @ b))
    if denom == 0:
        return float("nan")
    return float(np.clip((a @ b) / denom, -1.0, 1.0))


def average_ranks(values) -> np.ndarray:
    """1-based ranks, ties given the mean of their ranks (``scipy.stats.rankdata(method="average")``)."""
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="mergesort")
    sorted_v = v[order]
    starts = np.r_[True, sorted_v[1:] != sorted_v[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], v.size] - 1
    ranks = np.empty(v.size)
    ranks[order] = (first[group] + last[group]) / 2.0 + 1.0
    return ranks


def spearman(x, y) -> float:
    """Spearman rank correlation (STS-B): Pearson of the average ranks, as scipy.stats.spearmanr."""
    a, b = _pair(x, y, dtype=np.float64)
    return pearson(average_ranks(a), average_ranks(b))


_TASKS = {
    "cola": ("matthews_corrcoef",),
    "sst-2": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    "sts-b": ("pearson", "spearman"),
    "mnli": ("accuracy",),
    "mnli-mm": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "ax": ("accuracy",),
}
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mnli_mismatched": "mnli-mm", "mnli-m": "mnli",
            "mnli_matched": "mnli", "mnli-mismatched": "mnli-mm", "mnli-matched": "mnli"}
_FUNCTIONS = {"accuracy": accuracy, "f1": binary_f1, "matthews_corrcoef": matthews_corrcoef,
              "pearson": pearson, "spearman": spearman}


def glue_metric_names(task_name: str) -> tuple[str, ...]:
    """The metrics a GLUE task reports, the headline first (e.g. MRPC: f1, accuracy); unknown names raise."""
    task = task_name.strip().lower()
    task = _ALIASES.get(task, task)
    if task not in _TASKS:
        raise ValueError(f"unknown GLUE task {task_name!r}; known: {sorted(_TASKS)}")
    return _TASKS[task]


def glue_metrics(task_name: str, labels, predictions) -> dict[str, float]:
    """The GLUE-standard metrics of ``task_name`` (see the module docstring)."""
    return {name: _FUNCTIONS[name](labels, predictions) for name in glue_metric_names(task_name)}
