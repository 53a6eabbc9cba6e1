"""GLUE metrics against scikit-learn / scipy."""

import warnings

import numpy as np
import pytest

from bert_keras.metrics import glue

import sklearn.metrics as sklearn_metrics  # noqa: E402  (the [test] extra)
import scipy.stats as stats  # noqa: E402


def _sk(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("seed", range(20))
def test_classification_random(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    k = int(rng.integers(2, 4)) if seed % 3 else 2
    y, p = rng.integers(0, k, n), rng.integers(0, k, n)
    if seed % 4 == 0:  # mostly right
        p = np.where(rng.random(n) < 0.8, y, p)
    assert glue.accuracy(y, p) == pytest.approx(sklearn_metrics.accuracy_score(y, p))
    assert glue.matthews_corrcoef(y, p) == pytest.approx(_sk(sklearn_metrics.matthews_corrcoef, y, p), abs=1e-12)
    if k == 2:
        assert glue.binary_f1(y, p) == pytest.approx(_sk(sklearn_metrics.f1_score, y, p, zero_division=0.0))


@pytest.mark.parametrize("y,p", [
    ([1, 1, 1], [1, 1, 1]),  # all one class, all right
    ([0, 0, 0], [0, 0, 0]),  # no positive anywhere: F1 undefined -> 0
    ([0, 0, 0], [1, 0, 1]),
    ([1, 0, 1], [0, 0, 0]),  # constant predictions: MCC 0
    ([1], [0]),
    ([0, 1], [1, 0]),  # MCC -1
])
def test_classification_edges(y, p):
    assert glue.accuracy(y, p) == pytest.approx(sklearn_metrics.accuracy_score(y, p))
    assert glue.binary_f1(y, p) == pytest.approx(_sk(sklearn_metrics.f1_score, y, p, zero_division=0.0))
    assert glue.matthews_corrcoef(y, p) == pytest.approx(_sk(sklearn_metrics.matthews_corrcoef, y, p))


@pytest.mark.parametrize("seed", range(20))
def test_correlations_random_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 300))
    x = rng.normal(size=n)
    y = x * rng.uniform(-1, 1) + rng.normal(size=n)
    if seed % 2:  # STS-B-like scores on a 0-5 grid in steps of 0.2: many ties
        x, y = np.round(np.clip(x + 2.5, 0, 5) * 5) / 5, np.round(np.clip(y + 2.5, 0, 5) * 5) / 5
    assert glue.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert glue.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    np.testing.assert_allclose(glue.average_ranks(y), stats.rankdata(y))


def test_correlation_edges():
    assert glue.spearman([1, 2, 2, 3], [1, 3, 3, 5]) == pytest.approx(1.0)
    assert glue.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(glue.pearson([1, 1, 1], [1, 2, 3]))  # constant input: nan, like scipy
    assert np.isnan(glue.spearman([2, 2, 2], [1, 2, 3]))
    with pytest.raises(ValueError):
        glue.pearson([1, 2], [1, 2, 3])


def test_glue_metrics_sets():
    y, p = [0, 1, 1, 0], [0, 1, 0, 0]
    assert set(glue.glue_metrics("SST-2", y, p)) == {"accuracy"}
    assert set(glue.glue_metrics("mrpc", y, p)) == {"accuracy", "f1"}
    assert set(glue.glue_metrics("qqp", y, p)) == {"accuracy", "f1"}
    assert set(glue.glue_metrics("cola", y, p)) == {"matthews_corrcoef"}
    assert set(glue.glue_metrics("stsb", [0.1, 2.0, 4.5], [0.5, 1.5, 5.0])) == {"pearson", "spearman"}
    for task in ("mnli", "mnli-mm", "qnli", "rte", "wnli"):
        assert set(glue.glue_metrics(task, y, p)) == {"accuracy"}
    assert glue.glue_metrics("mrpc", y, p)["f1"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="unknown GLUE task"):
        glue.glue_metrics("squad", y, p)
