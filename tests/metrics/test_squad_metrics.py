"""SQuAD EM/F1: hand-checked cases, and equality with the official scripts (copies shipped in
tf-models-official) on the real SQuAD v1.1 split with synthetic predictions."""

import copy
import json
import random

import pytest

from bert_keras.metrics.squad import normalize_answer, squad_v1_scores, squad_v2_scores, token_f1


def _dataset(*qas, context="ctx"):
    return {"version": "x", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": list(qas)}]}]}


def _qa(qid, *golds):
    return {"id": qid, "question": "?", "answers": [{"text": g, "answer_start": 0} for g in golds]}


def test_normalize_answer():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("theory") == "theory"  # articles only as whole words
    assert normalize_answer("Ünïcode—dash") == "ünïcode—dash"  # only ASCII punctuation is removed


def test_v1_hand_checked():
    data = _dataset(_qa("q1", "Denver Broncos"), _qa("q2", "the Denver Broncos"), _qa("q3", "Santa Clara", "Levi's Stadium"),
                    _qa("q4", "gold"))
    predictions = {
        "q1": "The Denver Broncos",  # EM 1, F1 1
        # gold [denver, broncos], pred [denver, broncos, team]: overlap 2, P=2/3, R=1 -> F1 = 0.8
        "q2": "Denver Broncos team",
        # vs "Levi's Stadium" -> [levis, stadium]; pred [stadium]: P=1, R=1/2 -> F1 = 2/3; vs Santa Clara 0
        "q3": "the stadium",
        # q4 missing: scores 0 and counts in the total
    }
    scores = squad_v1_scores(data, predictions)
    assert scores["exact_match"] == pytest.approx(100 * 1 / 4)
    assert scores["f1"] == pytest.approx(100 * (1 + 0.8 + 2 / 3 + 0) / 4)
    assert token_f1("", "") == 0.0  # v1.1: nothing overlaps -> 0


def test_v2_hand_checked():
    data = _dataset(_qa("a", "Denver Broncos"), _qa("b"), _qa("c"), _qa("d", "x y"))
    predictions = {"a": "Denver", "b": "", "c": "something", "d": "x y"}
    # a: EM 0, F1 2*(1*0.5)/1.5 = 2/3; b: unanswerable and empty -> 1/1; c: 0/0; d: 1/1
    scores = squad_v2_scores(data, predictions)
    assert scores["exact"] == pytest.approx(100 * 2 / 4)
    assert scores["f1"] == pytest.approx(100 * (2 / 3 + 1 + 0 + 1) / 4)
    assert (scores["HasAns_total"], scores["NoAns_total"], scores["total"]) == (2, 2, 4)
    assert scores["HasAns_f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert scores["NoAns_exact"] == pytest.approx(50.0)
    assert "best_exact" not in scores
    # na_probs above the threshold turn predictions into "no answer": c becomes right, a wrong.
    na = {"a": 0.9, "b": 0.1, "c": 0.8, "d": 0.2}
    scores = squad_v2_scores(data, predictions, na_probs=na, na_prob_thresh=0.5)
    assert scores["exact"] == pytest.approx(100 * 3 / 4)
    assert scores["f1"] == pytest.approx(100 * 3 / 4)
    # Best threshold (exact): start at 2 (all "no answer"); sweep b(+0) d(+1)=3 c(-1) a(+0) -> best 3 at 0.2.
    assert scores["best_exact"] == pytest.approx(75.0)
    assert scores["best_exact_thresh"] == 0.2
    with pytest.raises(ValueError, match="no prediction"):
        squad_v2_scores(data, {"a": ""})


# ---------------------------------------------------------------- against the official scripts


@pytest.fixture(scope="module")
def squad_v11(shared_data):
    with open(shared_data / "squad" / "train-split-v1.1.json", encoding="utf-8") as f:
        return json.load(f)


def _questions(dataset):
    return [qa for article in dataset["data"] for p in article["paragraphs"] for qa in p["qas"]]


def _synthetic_predictions(dataset, seed=0):
    rng = random.Random(seed)
    questions = _questions(dataset)
    predictions = {}
    for qa in questions:
        golds = [a["text"] for a in qa["answers"]] or ["nothing"]
        gold = rng.choice(golds)
        kind = rng.randrange(7)
        if kind == 0:
            predictions[qa["id"]] = gold
        elif kind == 1:  # truncated
            predictions[qa["id"]] = " ".join(gold.split()[:-1]) or gold[: len(gold) // 2]
        elif kind == 2:  # extra words, different case and punctuation
            predictions[qa["id"]] = f"The {gold.upper()}, probably."
        elif kind == 3:  # wrong: another question's answer
            other = rng.choice(questions)["answers"]
            predictions[qa["id"]] = other[0]["text"] if other else "x"
        elif kind == 4:
            predictions[qa["id"]] = ""
        elif kind == 5:  # repeated tokens (Counter overlap)
            predictions[qa["id"]] = f"{gold} {gold.split()[0]}"
        # kind 6: no prediction
    return predictions


def test_v1_matches_official(squad_v11):
    import official.nlp.tools.squad_evaluate_v1_1 as official
    predictions = _synthetic_predictions(squad_v11)
    assert len(predictions) < len(_questions(squad_v11))  # some are missing
    ours = squad_v1_scores(squad_v11, predictions)
    theirs = official.evaluate(squad_v11["data"], predictions)  # fractions, not percent
    assert ours["exact_match"] == pytest.approx(100 * theirs["exact_match"], abs=1e-9)
    assert ours["f1"] == pytest.approx(100 * theirs["final_f1"], abs=1e-9)
    assert 5 < ours["exact_match"] < 95 and ours["f1"] > ours["exact_match"]


def _synthetic_v2(dataset, seed=1):
    rng = random.Random(seed)
    data = copy.deepcopy(dataset)
    data["version"] = "v2.0"
    for qa in _questions(data):
        impossible = rng.random() < 0.35
        qa["is_impossible"] = impossible
        if impossible:
            qa["plausible_answers"], qa["answers"] = qa["answers"], []
    predictions = _synthetic_predictions(data, seed)
    for qa in _questions(data):
        predictions.setdefault(qa["id"], "")
    na_probs = {qid: round(rng.random(), 1) for qid in predictions}  # coarse: plenty of ties
    return data, predictions, na_probs


@pytest.mark.parametrize("seed", [1, 2])
def test_v2_matches_official(squad_v11, seed):
    import official.nlp.tools.squad_evaluate_v2_0 as official
    data, predictions, na_probs = _synthetic_v2(squad_v11, seed)
    ours = squad_v2_scores(data, predictions, na_probs=na_probs)
    theirs = official.evaluate(data["data"], predictions, na_probs=na_probs)
    for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1",
                "NoAns_total"):
        assert ours[key] == pytest.approx(theirs[key], abs=1e-9), key
    for key in ("exact", "exact_thresh", "f1", "f1_thresh"):
        assert ours[f"best_{key}"] == pytest.approx(theirs[f"final_{key}"], abs=1e-9), key
    assert ours["best_f1"] >= ours["f1"]


def test_v2_threshold_matches_official_helpers(squad_v11):
    import official.nlp.tools.squad_evaluate_v2_0 as official
    data, predictions, na_probs = _synthetic_v2(squad_v11, 3)
    ours = squad_v2_scores(data, predictions, na_probs=na_probs, na_prob_thresh=0.5)
    has_ans = official._make_qid_to_has_ans(data["data"])
    exact_raw, f1_raw = official._get_raw_scores(data["data"], predictions)
    theirs = official._make_eval_dict(official._apply_no_ans_threshold(exact_raw, na_probs, has_ans, 0.5),
                                      official._apply_no_ans_threshold(f1_raw, na_probs, has_ans, 0.5))
    assert ours["exact"] == pytest.approx(theirs["exact"], abs=1e-9)
    assert ours["f1"] == pytest.approx(theirs["f1"], abs=1e-9)
