"""Rows of texts for fine-tuning embeddings and rerankers: (anchor, positive[, negative...]) rows, and scored pairs.

Layouts read (every row of a file has the same columns):
  JSONL   one object a line; its text fields are the columns in the order written, e.g. {"anchor", "positive"[,
          "negative"]} or sentence-transformers' dataset columns ({"sentence1", "sentence2", "score"}, {"query",
          "answer"}, ...). A field named "score" or "label" is the row's score (a number), not a text.
  TSV     a header line naming the columns (the same names: letters, digits, "_" and "-"), then one row a line
          (tab-separated, no quoting).
  STS-B   the STS Benchmark's sts-*.csv (tab-separated, no header: genre, file, year, id, score, sentence1,
          sentence2[, sources]): scored pairs, the 0-5 score divided by 5, as sentence-transformers' STSb examples
          normalize it.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re

from bert_keras.data.errors import DataFormatError
from bert_keras.data.text_files import open_text

SCORE_COLUMNS = ("score", "label")


@dataclasses.dataclass(frozen=True)
class TextRow:
    """One training or evaluation row.

    Args:
        texts: tuple of str. The columns: (anchor, positive, negatives...) or a pair's two texts.
        score: float or None. A scored pair's score (None for (anchor, positive[, negative]) rows).

    Example:
        >>> TextRow(("a cat", "a kitten"), 0.9).score
        0.9
    """
    texts: tuple
    score: float | None = None


def read_text_rows(path) -> tuple[list[TextRow], list[str]]:
    """The rows of a JSONL, TSV or STS Benchmark file (see the module docstring).

    Args:
        path: str or PathLike. The file; `.jsonl` / `.json` is read as JSON lines, anything else as TSV (STS-B's
            headerless layout when its first row has one).

    Returns:
        (rows, the text columns' names): STS-B's are ["sentence1", "sentence2"].

    Raises:
        DataFormatError: naming the file and line: a line that is not a JSON object, a row whose columns differ
            from the first row's, a text that is not a string, a score that is not a number, a TSV without a
            header, or fewer than two text columns.

    Example:
        >>> rows, columns = read_text_rows("train.jsonl")          # {"anchor": ..., "positive": ...} a line  # doctest: +SKIP
        >>> columns                                                                                          # doctest: +SKIP
        ['anchor', 'positive']
    """
    name = os.fspath(path).lower()
    if name.endswith((".jsonl", ".json")):
        return _read_jsonl(path)
    return _read_tsv(path)


def _read_jsonl(path) -> tuple[list[TextRow], list[str]]:
    rows, keys = [], None
    with open_text(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(path, number, f"not a JSON object ({e.msg}): write one object a line") from None
            if not isinstance(record, dict):
                raise DataFormatError(path, number, "not a JSON object: write one object a line, e.g. "
                                                    '{"anchor": "...", "positive": "..."}')
            if keys is None:
                keys = list(record)
                _check_columns(path, number, keys)
            elif sorted(record) != sorted(keys):
                raise DataFormatError(path, number, f"its fields ({', '.join(record)}) are not the first row's "
                                                    f"({', '.join(keys)}): give every row the same fields")
            rows.append(_row(path, number, [record[k] for k in keys], keys))
    return rows, [k for k in (keys or []) if k not in SCORE_COLUMNS]


def _read_tsv(path) -> tuple[list[TextRow], list[str]]:
    limit = csv.field_size_limit(1 << 30)
    try:
        with open_text(path, newline="") as f:
            lines = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    finally:
        csv.field_size_limit(limit)
    numbered = [(i, line) for i, line in enumerate(lines, 1) if any(field.strip() for field in line)]
    if not numbered:
        return [], []
    first = numbered[0][1]
    if _is_sts(first):
        rows = []
        for number, line in numbered:
            if len(line) < 7 or _number(line[4]) is None:
                raise DataFormatError(path, number, f"{len(line)} fields, not the STS Benchmark's (genre, file, "
                                                    "year, id, score, sentence1, sentence2)")
            rows.append(TextRow((line[5], line[6]), _number(line[4]) / 5.0))
        return rows, ["sentence1", "sentence2"]
    keys = [field.strip() for field in first]
    if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", k) for k in keys) or len(set(keys)) != len(keys):
        raise DataFormatError(path, numbered[0][0], "no header line: give a first line naming the tab-separated "
                                                    "columns (anchor, positive[, negative] or sentence1, sentence2, "
                                                    "score)")
    _check_columns(path, numbered[0][0], keys)
    rows = []
    for number, line in numbered[1:]:
        if len(line) != len(keys):
            raise DataFormatError(path, number, f"{len(line)} tab-separated fields, the header names "
                                                f"{len(keys)} ({', '.join(keys)})")
        rows.append(_row(path, number, line, keys))
    return rows, [k for k in keys if k not in SCORE_COLUMNS]


def _is_sts(fields: list) -> bool:
    return len(fields) >= 7 and _number(fields[4]) is not None and _number(fields[3]) is not None


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def _check_columns(path, number: int, keys: list) -> None:
    scores = [k for k in keys if k in SCORE_COLUMNS]
    texts = [k for k in keys if k not in SCORE_COLUMNS]
    if len(scores) > 1:
        raise DataFormatError(path, number, f"two score columns ({', '.join(scores)}): keep one")
    if len(texts) < 2:
        raise DataFormatError(path, number, f"{len(texts)} text column(s) ({', '.join(texts) or 'none'}): give at "
                                            "least two (anchor, positive; or a pair's sentence1, sentence2)")


def _row(path, number: int, values: list, keys: list) -> TextRow:
    texts, score = [], None
    for key, value in zip(keys, values):
        if key in SCORE_COLUMNS:
            score = value if isinstance(value, (int, float)) and not isinstance(value, bool) else _number(value)
            if score is None or score != score:
                raise DataFormatError(path, number, f"{key} {value!r} is not a number")
            score = float(score)
        elif not isinstance(value, str):
            raise DataFormatError(path, number, f"{key} is {type(value).__name__}, not a text")
        else:
            texts.append(value)
    return TextRow(tuple(texts), score)
