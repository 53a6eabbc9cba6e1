"""Entity-level tagging metrics: seqeval's exact numbers (default and strict modes)."""

import random
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert_keras.metrics import tagging

import seqeval.metrics as seqeval_metrics  # noqa: E402  (the [test] extra)
import seqeval.scheme as seqeval_scheme  # noqa: E402


def _seqeval(y_true, y_pred, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (seqeval_metrics.precision_score(y_true, y_pred, **kwargs),
                seqeval_metrics.recall_score(y_true, y_pred, **kwargs),
                seqeval_metrics.f1_score(y_true, y_pred, **kwargs))


def _report(y_true, y_pred, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return seqeval_metrics.classification_report(y_true, y_pred, output_dict=True, **kwargs)


def _assert_same(y_true, y_pred, mode="default", scheme=None, averages=("micro", "macro", "weighted")):
    """Our micro/macro/weighted P/R/F1 equal seqeval's *_score functions, and our report its
    classification_report (which holds per-type and all three averages)."""
    kwargs = {} if mode == "default" else {"mode": "strict", "scheme": getattr(seqeval_scheme, scheme)}
    for average in averages:
        ours = tagging.precision_recall_f1(y_true, y_pred, average=average, mode=mode, scheme=scheme)[:3]
        assert ours == pytest.approx(_seqeval(y_true, y_pred, average=average, **kwargs), abs=1e-12,
                              nan_ok=True), average
    ours = tagging.classification_report(y_true, y_pred, mode=mode, scheme=scheme)
    theirs = _report(y_true, y_pred, **kwargs)
    assert set(ours) == set(theirs)
    for key, row in theirs.items():
        for name, value in row.items():
            assert ours[key][name] == pytest.approx(float(value), abs=1e-12, nan_ok=True), (key, name)


def test_hand_checked():
    y_true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    y_pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    # true {PER, LOC, ORG}, predicted {PER, ORG@0:3, ORG}: 2 right of 3 each way.
    assert tagging.precision_recall_f1(y_true, y_pred) == pytest.approx((2 / 3, 2 / 3, 2 / 3, 3))
    per_type = tagging.precision_recall_f1(y_true, y_pred, average=None)
    assert per_type["LOC"] == (0.0, 0.0, 0.0, 1)
    assert per_type["ORG"] == pytest.approx((0.5, 1.0, 2 / 3, 1))


def test_stray_inside_tag_starts_an_entity_in_default_mode():
    # seqeval's default (conlleval) mode: I- after O opens an entity; a type change splits one.
    assert tagging.get_entities(["O", "I-PER", "I-PER", "I-LOC", "O"]) == [("PER", 1, 2), ("LOC", 3, 3)]
    assert tagging.get_entities(["B-PER", "I-PER", "B-PER"]) == [("PER", 0, 1), ("PER", 2, 2)]
    assert tagging.get_entities(["S-PER", "B-LOC", "E-LOC"]) == [("PER", 0, 0), ("LOC", 1, 2)]
    # ...while strict IOB2 drops the malformed entity.
    y_true, y_pred = [["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]]
    assert tagging.f1_score(y_true, y_pred) == 1.0
    assert tagging.f1_score(y_true, y_pred, mode="strict", scheme="IOB2") == 0.0
    _assert_same(y_true, y_pred)
    _assert_same(y_true, y_pred, "strict", "IOB2")


def test_sentences_do_not_merge():
    y = [["O", "B-PER"], ["I-PER", "O"]]
    assert tagging.get_entities(y) == [("PER", 1, 1), ("PER", 3, 3)]


def test_errors():
    with pytest.raises(ValueError, match="differ in shape"):
        tagging.precision_recall_f1([["O"]], [["O", "O"]])
    with pytest.raises(ValueError, match="invalid tag"):
        tagging.precision_recall_f1([["E-PER"]], [["O"]], mode="strict", scheme="IOB2")
    with pytest.raises(ValueError, match="needs a scheme"):
        tagging.precision_recall_f1([["O"]], [["O"]], mode="strict")


TYPES = ["PER", "LOC", "ORG"]


def _random_tags(rng, n, prefixes):
    return [rng.choice(["O"] + [f"{p}-{t}" for p in prefixes for t in TYPES]) for _ in range(n)]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["BI", "BIES"]))
def test_random_sequences_match_seqeval(seed, prefixes):
    """Arbitrary (mostly malformed) tag soup, no shared data needed."""
    rng = random.Random(seed)
    lengths = [rng.randint(1, 8) for _ in range(rng.randint(1, 5))]
    y_true = [_random_tags(rng, n, prefixes) for n in lengths]
    y_pred = [_random_tags(rng, n, prefixes) for n in lengths]
    _assert_same(y_true, y_pred)
    scheme = "IOB2" if prefixes == "BI" else "IOBES"
    _assert_same(y_true, y_pred, "strict", scheme)


# ---------------------------------------------------------------- the real CoNLL-2003 valid set


@pytest.fixture(scope="module")
def conll_valid_tags(shared_data):
    from bert_keras.data.conll import read_conll2003

    return [list(s.tags) for s in read_conll2003(shared_data / "conll2003" / "valid.txt")]


def _corrupt(tags, rng, rate):
    out = []
    for sentence in tags:
        new = list(sentence)
        for i, tag in enumerate(new):
            if rng.random() >= rate:
                continue
            kind = rng.randrange(4)
            if kind == 0:
                new[i] = "O"
            elif kind == 1 and tag != "O":  # flip B <-> I (creates stray I- tags)
                new[i] = ("I-" if tag[0] == "B" else "B-") + tag[2:]
            elif kind == 2:
                new[i] = rng.choice(["B-", "I-"]) + rng.choice(["PER", "LOC", "ORG", "MISC"])
            else:  # change the type only
                new[i] = tag if tag == "O" else tag[:2] + rng.choice(["PER", "LOC", "ORG", "MISC"])
        out.append(new)
    return out


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rate=st.sampled_from([0.01, 0.05, 0.2]))
def test_conll_valid_corrupted_matches_seqeval(conll_valid_tags, seed, rate):
    """The whole CoNLL valid set (3,250 sentences) with corrupted predictions; seqeval's strict
    mode is slow, so it is compared through classification_report alone."""
    y_pred = _corrupt(conll_valid_tags, random.Random(seed), rate)
    _assert_same(conll_valid_tags, y_pred, averages=("micro",))
    _assert_same(conll_valid_tags, y_pred, "strict", "IOB2", averages=())


def test_conll_valid_gold_is_perfect(conll_valid_tags):
    assert tagging.precision_recall_f1(conll_valid_tags, conll_valid_tags) == (1.0, 1.0, 1.0, 5942)
