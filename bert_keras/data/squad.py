"""SQuAD v1.1 / v2.0 JSON reader.

Layout: ``{"version": ..., "data": [{"title": ..., "paragraphs": [{"context": ...,
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?,
"plausible_answers"?}]}]}]}``. v2.0 marks unanswerable questions with ``"is_impossible": true``
and an empty ``answers`` list (``plausible_answers`` is ignored); a question without the flag is
impossible iff it has no answers.

``answer_start`` is a character offset into ``context``; ``answer_offset_mismatches`` lists the
answers whose ``context[start:start + len(text)] != text`` (reading never fails on those).
``answer_span`` is google-research run_squad's training check on a question's first answer (the
whitespace-separated words its offset spans must contain the answer's words) and where it then trains:
fine-tuning skips and counts the questions that fail it, and trains the others there
(``answerable_for_training``).
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


def _is_whitespace(c: str) -> bool:
    """run_squad.py's is_whitespace: the characters that separate its words (not all of Unicode's spaces)."""
    return c in " \t\r\n" or ord(c) == 0x202F


def _words(context: str) -> tuple[list[str], list[int], list[int]]:
    """(words, the word index of each character, each word's first character) as run_squad.py's
    read_squad_examples builds its doc_tokens and char_to_word_offset."""
    words, word_of_char, starts, after_space = [], [], [], True
    for i, c in enumerate(context):
        if _is_whitespace(c):
            after_space = True
        else:
            if after_space:
                words.append(c)
                starts.append(i)
            else:
                words[-1] += c
            after_space = False
        word_of_char.append(len(words) - 1)
    return words, word_of_char, starts


def answer_span(example: SquadExample, _words_of=None) -> tuple[int, int] | None:
    """Where google-research run_squad.py trains on a question's first answer, as [start, end) characters of
    its context; None where it skips the question ("Could not find answer").

    run_squad's check: the words (split at its whitespace) from the one holding ``answer_start`` to the one
    holding the answer's last character, joined by single spaces, must contain the answer's own words joined
    by single spaces; it then trains on that text where it is found within those words (_improve_answer_span),
    so an offset a few characters inside the answer's first word still trains on the answer. An offset outside
    the context (run_squad stops there with an IndexError) or an empty answer is None.

    Args:
        example: a SquadExample with at least one answer.

    Returns:
        (start, end) of the answer's text in the context, or None.

    Example:
        >>> e = SquadExample("q1", "Who won?", "Denver Broncos won.", [("Broncos", 7)])
        >>> answer_span(e), answer_span(dataclasses.replace(e, answers=[("Broncos", 9)]))
        ((7, 14), (7, 14))
        >>> answer_span(dataclasses.replace(e, answers=[("Broncos", 15)])) is None
        True
    """
    text, start = example.answers[0]
    last = start + len(text) - 1
    context = example.context
    if not 0 <= start <= last < len(context):
        return None
    words, word_of_char, starts = _words_of(context) if _words_of else _words(context)
    first_word, last_word = word_of_char[start], word_of_char[last]
    if first_word < 0:                          # whitespace before the first word (run_squad: words[-1:...])
        return None
    at = " ".join(words[first_word:last_word + 1]).find(" ".join(text.strip().split()))
    if at < 0:
        return None
    cleaned = " ".join(text.strip().split())
    chars = [starts[k] + j for k in range(first_word, last_word + 1) for j in range(len(words[k]) + 1)]
    return chars[at], chars[at + len(cleaned) - 1] + 1     # (a separating space maps to one past its word)


def answer_found(example: SquadExample) -> bool:
    """Does google-research run_squad.py train on the question (`answer_span` is not None)? An unanswerable
    question passes.

    Args:
        example: a SquadExample.

    Returns:
        False for a question run_squad skips because its answer is not at its answer_start.

    Example:
        >>> e = SquadExample("q1", "Who won?", "Denver Broncos won.", [("Broncos", 7)])
        >>> answer_found(e), answer_found(dataclasses.replace(e, answers=[("Broncos", 1_000_000)]))
        (True, False)
    """
    return example.is_impossible or not example.answers or answer_span(example) is not None


def answerable_for_training(examples) -> tuple[list[SquadExample], list[SquadExample], list[str]]:
    """(kept, skipped, moved): the questions google-research run_squad trains on, with the first answer where it
    trains on it; the ones it skips ("Could not find answer"); the ids of kept questions whose first answer was
    moved from its answer_start to where run_squad finds its text (`answer_span`). Each in file order.

    Args:
        examples: SquadExamples (read_squad).

    Returns:
        (examples to train on, examples skipped, ids of the answers moved).

    Example:
        >>> good = SquadExample("q1", "Who won?", "Denver Broncos won.", [("Broncos", 9)])
        >>> bad = SquadExample("q2", "Who won?", "Denver Broncos won.", [("Broncos", 1_000_000)])
        >>> kept, skipped, moved = answerable_for_training([good, bad])
        >>> kept[0].answers[0], [e.qid for e in skipped], moved
        (('Broncos', 7), ['q2'], ['q1'])
    """
    cache = {}

    def words_of(context):
        if context not in cache:
            cache.clear()                          # one paragraph's questions are consecutive
            cache[context] = _words(context)
        return cache[context]
    kept, skipped, moved = [], [], []
    for example in examples:
        if example.is_impossible or not example.answers:
            kept.append(example)
            continue
        span = answer_span(example, words_of)
        if span is None:
            skipped.append(example)
            continue
        if span[0] != example.answers[0][1] or span[1] - span[0] != len(example.answers[0][0]):
            answer = (example.context[span[0]:span[1]], span[0])
            example = dataclasses.replace(example, answers=[answer, *example.answers[1:]])
            moved.append(example.qid)
        kept.append(example)
    return kept, skipped, moved


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
