"""Entity-level precision / recall / F1 for tag sequences, with seqeval's exact semantics.

Default mode (``mode="default"``) is seqeval's conlleval-compatible chunking
(``seqeval.metrics.sequence_labeling.get_entities``), which accepts IOB1, IOB2, IOE and BIOES
tags alike and is lenient with malformed sequences:

* the prefix is the first character of a tag, the type what follows the first ``-``
  (``"B-PER"`` -> ``B``/``PER``; a bare ``"B"`` has type ``_``);
* a chunk starts at ``B``/``S``, at ``I``/``E`` after ``O`` (so a stray ``I-`` after ``O``
  **starts** an entity), at ``I``/``E`` after ``E``/``S``, and wherever the type changes;
* a chunk ends before ``B``/``S``/``O`` following ``B``/``I``, after ``E``/``S``, and wherever
  the type changes;
* the sentences of a list of lists are joined with an ``O`` between them, so no entity spans
  two sentences.

Strict mode (``mode="strict"``, ``scheme`` one of IOB1, IOB2, IOE2, IOBES, BILOU) is seqeval's
``mode="strict"``: an entity must be well formed in the scheme (IOB2: ``B-X`` then ``I-X``*;
IOBES: ``S-X`` or ``B-X I-X* E-X``); malformed pieces are dropped, and a prefix foreign to the
scheme raises ``ValueError``.

Scores: per type ``precision = tp / predicted``, ``recall = tp / true``, F1 their harmonic mean,
each 0.0 when undefined (seqeval's default ``zero_division``, without the warning). ``average``:
``"micro"`` (pooled counts), ``"macro"`` (mean over the types seen in either sequence),
``"weighted"`` (mean weighted by true support) or ``None`` (per type).
"""

from __future__ import annotations

from collections import defaultdict

_AVERAGES = (None, "micro", "macro", "weighted")

# ---------------------------------------------------------------- default (conlleval) mode


def _split_default(chunk: str, suffix: bool) -> tuple[str, str]:
    if suffix:
        return chunk[-1], chunk[:-1].rsplit("-", maxsplit=1)[0] or "_"
    return chunk[0], chunk[1:].split("-", maxsplit=1)[-1] or "_"


def _end_of_chunk(prev_tag, tag, prev_type, type_) -> bool:
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _start_of_chunk(prev_tag, tag, prev_type, type_) -> bool:
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(seq, suffix: bool = False) -> list[tuple[str, int, int]]:
    """seqeval's default chunking: ``[(type, start, end_inclusive), ...]``; a list of sentences
    is joined with an ``O`` between sentences (positions count those separators)."""
    if any(isinstance(s, list) for s in seq):
        seq = [item for sentence in seq for item in list(sentence) + ["O"]]
    prev_tag, prev_type, begin = "O", "", 0
    chunks = []
    for i, chunk in enumerate(list(seq) + ["O"]):
        if not chunk:
            raise ValueError(f"empty tag at position {i}")
        tag, type_ = _split_default(chunk, suffix)
        if _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, begin, i - 1))
        if _start_of_chunk(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return chunks


# ---------------------------------------------------------------- strict mode

_ANY = "IOBESUL"
# (previous prefixes, current prefixes, type condition) tables of seqeval.scheme.
_SCHEMES = {
    "IOB1": dict(
        allowed="IOB",
        start=[("O", "I", "any"), ("I", "I", "diff"), ("B", "I", "any"), ("I", "B", "same"), ("B", "B", "same")],
        inside=[("B", "I", "same"), ("I", "I", "same")],
        end=[("I", "I", "diff"), ("I", "O", "any"), ("I", "B", "any"), ("B", "O", "any"), ("B", "I", "diff"),
             ("B", "B", "same")]),
    "IOB2": dict(
        allowed="IOB",
        start=[(_ANY, "B", "any")],
        inside=[("B", "I", "same"), ("I", "I", "same")],
        end=[("I", "O", "any"), ("I", "I", "diff"), ("I", "B", "any"), ("B", "O", "any"), ("B", "I", "diff"),
             ("B", "B", "any")]),
    "IOE2": dict(
        allowed="IOE",
        start=[("O", "I", "any"), ("O", "E", "any"), ("E", "I", "any"), ("E", "E", "any"), ("I", "I", "diff"),
               ("I", "E", "diff")],
        inside=[("I", "E", "same"), ("I", "I", "same")],
        end=[("E", _ANY, "any")]),
    "IOBES": dict(
        allowed="IOBES",
        start=[(_ANY, "B", "any"), (_ANY, "S", "any")],
        inside=[("B", "I", "same"), ("B", "E", "same"), ("I", "I", "same"), ("I", "E", "same")],
        end=[("S", _ANY, "any"), ("E", _ANY, "any")]),
    "BILOU": dict(
        allowed="BILOU",
        start=[(_ANY, "B", "any"), (_ANY, "U", "any")],
        inside=[("B", "I", "same"), ("B", "L", "same"), ("I", "I", "same"), ("I", "L", "same")],
        end=[("U", _ANY, "any"), ("L", _ANY, "any")]),
}
_SCHEMES["BIOES"] = _SCHEMES["IOBES"]


def _matches(patterns, prev, cur) -> bool:
    for prev_prefixes, cur_prefixes, cond in patterns:
        if prev[0] in prev_prefixes and cur[0] in cur_prefixes:
            if cond == "any" or (cond == "same") == (prev[1] == cur[1]):
                return True
    return False


def _strict_entities(sentence, scheme, suffix, sent_id) -> list[tuple[int, str, int, int]]:
    table = _SCHEMES[scheme]
    tokens = []
    for token in list(sentence) + ["O"]:
        prefix, rest = (token[-1:], token[:-1]) if suffix else (token[:1], token[1:])
        if prefix not in table["allowed"]:
            raise ValueError(f"invalid tag {token!r} for scheme {scheme} (allowed prefixes: {table['allowed']})")
        tokens.append((prefix, rest.strip("-") or "_"))
    entities = []
    i, prev = 0, ("O", "_")
    while i < len(tokens):
        token = tokens[i]
        if _matches(table["start"], prev, token):
            end, inner = len(tokens) - 2, token
            for j in range(i + 1, len(tokens)):
                if _matches(table["inside"], inner, tokens[j]):
                    inner = tokens[j]
                else:
                    end = j
                    break
            if _matches(table["end"], tokens[end - 1], tokens[end]):
                entities.append((sent_id, token[1], i, end))
            i = end
        else:
            i += 1
        prev = tokens[i - 1]
    return entities


# ---------------------------------------------------------------- scores


def _check(y_true, y_pred):
    if len(y_true) != len(y_pred) or any(len(t) != len(p) for t, p in zip(y_true, y_pred)):
        raise ValueError(f"y_true and y_pred differ in shape: {[len(t) for t in y_true][:10]}... vs "
                         f"{[len(p) for p in y_pred][:10]}...")


def _entity_sets(y_true, y_pred, mode, scheme, suffix):
    _check(y_true, y_pred)
    true, pred = defaultdict(set), defaultdict(set)
    if mode == "default":
        for target, seqs in ((true, y_true), (pred, y_pred)):
            for type_, start, end in get_entities([list(s) for s in seqs], suffix):
                target[type_].add((start, end))
    elif mode == "strict":
        if scheme is None:
            raise ValueError(f"mode='strict' needs a scheme, one of {sorted(_SCHEMES)}")
        scheme = scheme.upper()
        if scheme not in _SCHEMES:
            raise ValueError(f"unknown scheme {scheme!r}; known: {sorted(_SCHEMES)}")
        for target, seqs in ((true, y_true), (pred, y_pred)):
            for sent_id, sentence in enumerate(seqs):
                for entity in _strict_entities(sentence, scheme, suffix, sent_id):
                    target[entity[1]].add(entity)
    else:
        raise ValueError(f"mode must be 'default' or 'strict', got {mode!r}")
    return true, pred


def _div(a, b) -> float:
    return a / b if b else 0.0


def _prf(tp, n_pred, n_true):
    p, r = _div(tp, n_pred), _div(tp, n_true)
    return p, r, _div(2 * p * r, p + r)


def _scores(true, pred, average):
    if average not in _AVERAGES:
        raise ValueError(f"average must be one of {_AVERAGES}, got {average!r}")
    types = sorted(set(true) | set(pred))
    counts = {t: (len(true[t] & pred[t]), len(pred[t]), len(true[t])) for t in types}
    per_type = {t: (*_prf(*c), c[2]) for t, c in counts.items()}
    if average is None:
        return per_type
    support = sum(c[2] for c in counts.values())
    if average == "micro":
        tp, n_pred = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
        return (*_prf(tp, n_pred, support), support)
    if not types:
        nan = float("nan")
        return (nan, nan, nan, 0) if average == "macro" else (0.0, 0.0, 0.0, 0)
    if average == "macro":
        return tuple(sum(v[k] for v in per_type.values()) / len(types) for k in range(3)) + (support,)
    if support == 0:  # weighted, nothing true: seqeval's special case
        return (0.0, 0.0, 0.0, 0)
    return tuple(sum(v[k] * v[3] for v in per_type.values()) / support for k in range(3)) + (support,)


def precision_recall_f1(y_true, y_pred, *, average: str | None = "micro", mode: str = "default",
                        scheme: str | None = None, suffix: bool = False):
    """``(precision, recall, f1, support)``; with ``average=None`` a dict ``{type: (p, r, f1, support)}``.
    ``y_true``/``y_pred`` are lists of tag lists of equal shapes."""
    return _scores(*_entity_sets(y_true, y_pred, mode, scheme, suffix), average)


def f1_score(y_true, y_pred, **kwargs) -> float:
    """Entity-level F1, as seqeval's f1_score (kwargs: mode, scheme, suffix, average)."""
    return precision_recall_f1(y_true, y_pred, **kwargs)[2]


def precision_score(y_true, y_pred, **kwargs) -> float:
    """Entity-level precision, as seqeval's precision_score."""
    return precision_recall_f1(y_true, y_pred, **kwargs)[0]


def recall_score(y_true, y_pred, **kwargs) -> float:
    """Entity-level recall, as seqeval's recall_score."""
    return precision_recall_f1(y_true, y_pred, **kwargs)[1]


def classification_report(y_true, y_pred, *, mode: str = "default", scheme: str | None = None,
                          suffix: bool = False) -> dict:
    """Like ``seqeval.metrics.classification_report(..., output_dict=True)``: per type and
    ``"micro avg"``/``"macro avg"``/``"weighted avg"``, each
    ``{"precision", "recall", "f1-score", "support"}``."""
    true, pred = _entity_sets(y_true, y_pred, mode, scheme, suffix)
    keys = ("precision", "recall", "f1-score", "support")
    report = {t: dict(zip(keys, v)) for t, v in _scores(true, pred, None).items()}
    for average in ("micro", "macro", "weighted"):
        report[f"{average} avg"] = dict(zip(keys, _scores(true, pred, average)))
    return report
