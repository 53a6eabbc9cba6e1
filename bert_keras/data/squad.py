"""SQuAD v1.1 / v2.0 JSON reader.

Layout: ``{"version": ..., "data": [{"title": ..., "paragraphs": [{"context": ...,
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?,
"plausible_answers"?}]}]}]}``. v2.0 marks unanswerable questions with ``"is_impossible": true``
and an empty ``answers`` list (``plausible_answers`` is ignored); a question without the flag is
impossible iff it has no answers.

``answer_start`` is a character offset into ``context``; ``answer_offset_mismatches`` lists the
answers whose ``context[start:start + len(text)] != text`` (reading never fails on those).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os

from bert_keras.data.errors import DataFormatError
from bert_keras.data.text_files import open_text


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One SQuAD question: its context, all reference answers as (text, character start), and SQuAD 2.0's
    unanswerable flag."""

    qid: str
    question: str
    context: str
    answers: list[tuple[str, int]]  # (text, char_start), all reference answers in file order
    is_impossible: bool = False
    title: str = ""


def load_squad_json(path) -> dict:
    """Parse a SQuAD JSON file, with ``DataFormatError`` (file and line) on bad JSON."""
    try:
        with open_text(path) as f:
            dataset = json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})") from e
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise DataFormatError(path, None, 'not a SQuAD file: expected {"version": ..., "data": [...]}')
    return dataset


def squad_examples(dataset: dict, source="<squad>") -> list[SquadExample]:
    """Flatten a parsed SQuAD dict into examples (``source`` names the file in errors)."""
    examples = []
    for a, article in enumerate(dataset["data"]):
        where = f"data[{a}]"
        try:
            title = article.get("title", "")
            for p, paragraph in enumerate(article["paragraphs"]):
                where = f"data[{a}].paragraphs[{p}]"
                context = paragraph["context"]
                for q, qa in enumerate(paragraph["qas"]):
                    where = f"data[{a}].paragraphs[{p}].qas[{q}]"
                    answers = [(ans["text"], int(ans["answer_start"])) for ans in qa["answers"]]
                    impossible = bool(qa.get("is_impossible", not answers))
                    if not impossible and not answers:
                        raise DataFormatError(source, None, f"{where} (id {qa['id']}): no answers and not is_impossible")
                    examples.append(SquadExample(qa["id"], qa["question"], context, answers, impossible, title))
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, DataFormatError):
                raise
            raise DataFormatError(source, None, f"{where}: malformed entry ({type(e).__name__}: {e})") from e
    return examples


def read_squad(path) -> list[SquadExample]:
    """Every question of a SQuAD 1.1 or 2.0 JSON file, in file order; bad JSON raises DataFormatError (file, line)."""
    return squad_examples(load_squad_json(path), os.fspath(path))


def answer_offset_mismatches(examples) -> list[tuple[str, str, int]]:
    """``(qid, text, answer_start)`` of every answer whose offset does not point at its text."""
    return [(ex.qid, text, start) for ex in examples for text, start in ex.answers
            if ex.context[start:start + len(text)] != text]


def hold_out_articles(dataset: dict, titles_or_n) -> tuple[dict, dict]:
    """Split a parsed SQuAD dict by article: ``(kept, held_out)``, both in the same schema.

    ``titles_or_n`` is either a collection of article titles to hold out (all must exist), or an
    int ``n``: the **last** ``n`` articles in file order are held out (deterministic).
    """
    articles = dataset["data"]
    if isinstance(titles_or_n, int):
        if not 0 <= titles_or_n <= len(articles):
            raise ValueError(f"cannot hold out {titles_or_n} of {len(articles)} articles")
        cut = len(articles) - titles_or_n
        held = set(range(cut, len(articles)))
    else:
        wanted = set(titles_or_n)
        unknown = wanted - {article.get("title") for article in articles}
        if unknown:
            raise ValueError(f"unknown article titles: {sorted(unknown)}")
        held = {i for i, article in enumerate(articles) if article.get("title") in wanted}
    base = {k: v for k, v in dataset.items() if k != "data"}
    kept = dict(copy.deepcopy(base), data=[a for i, a in enumerate(articles) if i not in held])
    out = dict(copy.deepcopy(base), data=[a for i, a in enumerate(articles) if i in held])
    return kept, out
