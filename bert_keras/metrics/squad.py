"""SQuAD evaluation: the official v1.1 and v2.0 exact-match / F1, re-implemented.

Semantics follow the official scripts (``evaluate-v1.1.py`` and ``evaluate-v2.0.py``):

* ``normalize_answer``: lower-case, drop ASCII punctuation (``string.punctuation``), drop the
  articles ``a``/``an``/``the`` as whole words, collapse whitespace.
* token F1: bag-of-tokens overlap (``Counter`` intersection) of the normalized answers;
  each question scores the max over its gold answers.
* v1.1: a question without a prediction scores 0 and still counts in the total. Gold answers
  are used as they are (no filtering).
* v2.0: gold answers whose normalization is empty are dropped; a question with no gold
  answer left is unanswerable and its only correct prediction is the empty string (EM = F1 = 1
  iff the prediction is empty). ``na_probs[qid] > na_prob_thresh`` turns a prediction into
  "no answer". With ``na_probs`` the best-threshold search of ``find_all_best_thresh`` is run,
  reproducing the official tie handling (questions visited in ``na_probs`` order, sorted by
  probability with a stable sort). Unlike v1.1 every question needs a prediction (the official
  v2.0 script fails on a missing one too); a clear ``ValueError`` is raised.

All scores are percentages, like the official scripts. ``dataset`` is the parsed JSON file
(``{"version": ..., "data": [...]}``) or its ``"data"`` list.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Iterable, Mapping

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official SQuAD rule)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> int:
    """1 when the answers are equal after the official normalisation (case, punctuation, articles), else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """v1.1 token F1: 0 when nothing overlaps (including when either side is empty)."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    num_same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1_v2(prediction: str, gold: str) -> float:
    """v2.0 token F1: if either side has no tokens, 1 iff both have none."""
    pred_tokens = normalize_answer(prediction).split() if prediction else []
    gold_tokens = normalize_answer(gold).split() if gold else []
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    return token_f1(prediction, gold)


def _articles(dataset) -> list:
    if isinstance(dataset, Mapping):
        if "data" not in dataset:
            raise ValueError("SQuAD dataset dict has no 'data' key")
        return dataset["data"]
    return list(dataset)


def _questions(dataset) -> Iterable[dict]:
    for article in _articles(dataset):
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def squad_v1_scores(dataset, predictions: Mapping[str, str]) -> dict:
    """Official SQuAD v1.1 scores: ``{"exact_match": %, "f1": %}``."""
    exact = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue  # the official script logs and scores 0
        golds = [answer["text"] for answer in qa["answers"]]
        if not golds:
            raise ValueError(f"question {qa['id']} has no gold answer (is this a SQuAD v2.0 file?)")
        prediction = predictions[qa["id"]]
        exact += max(exact_match(prediction, gold) for gold in golds)
        f1 += max(token_f1(prediction, gold) for gold in golds)
    if total == 0:
        raise ValueError("SQuAD dataset has no questions")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def _find_best_thresh(predictions, scores, na_probs, has_answer):
    """``find_best_thresh`` of the official v2.0 script (start from "all no-answer", sweep upward)."""
    score = best_score = sum(1 for qid in scores if not has_answer[qid])
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        score += diff
        if score > best_score:
            best_score = score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def squad_v2_scores(dataset, predictions: Mapping[str, str], na_probs: Mapping[str, float] | None = None,
                    na_prob_thresh: float = 1.0) -> dict:
    """Official SQuAD v2.0 scores: exact, f1, total, HasAns_*/NoAns_* (when present), and with
    ``na_probs`` also best_exact, best_exact_thresh, best_f1, best_f1_thresh."""
    has_answer: dict[str, bool] = {}
    exact_raw: dict[str, float] = {}
    f1_raw: dict[str, float] = {}
    missing = []
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        if qid not in predictions:
            missing.append(qid)
            continue
        golds = [answer["text"] for answer in qa["answers"] if normalize_answer(answer["text"])] or [""]
        prediction = predictions[qid]
        exact_raw[qid] = max(exact_match(prediction, gold) for gold in golds)
        f1_raw[qid] = max(token_f1_v2(prediction, gold) for gold in golds)
    if missing:
        raise ValueError(f"{len(missing)} question(s) have no prediction, e.g. {missing[:3]}")
    if not has_answer:
        raise ValueError("SQuAD dataset has no questions")
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    lacking = [qid for qid in has_answer if qid not in probs]
    if lacking:
        raise ValueError(f"na_probs lacks {len(lacking)} question(s), e.g. {lacking[:3]}")

    def thresholded(raw):
        return {qid: float(not has_answer[qid]) if probs[qid] > na_prob_thresh else s for qid, s in raw.items()}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids):
        return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
                "f1": 100.0 * sum(f1[q] for q in qids) / len(qids), "total": len(qids)}

    out = summary(list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, has in has_answer.items() if has == wanted]
        if qids:
            out.update({f"{prefix}_{k}": v for k, v in summary(qids).items()})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = _find_best_thresh(predictions, exact_raw, probs, has_answer)
        out["best_f1"], out["best_f1_thresh"] = _find_best_thresh(predictions, f1_raw, probs, has_answer)
    return out
