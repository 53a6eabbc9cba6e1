"""GLUE TSV readers (the layouts written by GLUE's ``download_glue_data.py``).

Files are read like google-research/bert's ``run_classifier`` (``csv.reader`` with
``delimiter="\\t"`` and no quote character, i.e. ``QUOTE_NONE``: quotes are ordinary text), as
UTF-8 with an optional BOM (MRPC's header has one). Every data row must have as many columns
as the header (CoLA train/dev: exactly 4). Labelled and unlabelled (test) files are told apart
by their header.

============  =====================================================  ==========================
task          labelled file (columns)                                 test file
============  =====================================================  ==========================
cola          no header: ``source label author_label sentence``       ``index sentence``
sst-2         ``sentence label``                                      ``index sentence``
mrpc          ``Quality #1-ID #2-ID #1-String #2-String``             ``index #1-ID ...``
qqp           ``id qid1 qid2 question1 question2 is_duplicate``       ``id question1 question2``
mnli          12 (train) / 16 (dev) columns: sentence1/2 at 8/9,      sentence1/2 at 8/9
              ``gold_label`` last
qnli/rte/wnli ``index sentence1 sentence2 label`` (qnli: question,    no ``label`` column
              sentence)
sts-b         ``index genre filename year old_index source1 source2  no ``score`` column
              sentence1 sentence2 score`` (float)
============  =====================================================  ==========================

``read_glue(task, path)`` returns ``(examples, label_names)``. ``TextExample.label`` is the
index into ``label_names`` (classification), a float (STS-B, ``label_names`` is ``None``), or
``None`` for test files. ``guid`` is ``"<file stem>-<row>"`` (row counted from 0 after any header).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib

from bert_keras.data.errors import DataFormatError

GLUE_LABELS: dict[str, list[str] | None] = {
    "cola": ["0", "1"],
    "sst-2": ["0", "1"],
    "mrpc": ["0", "1"],
    "qqp": ["0", "1"],
    "mnli": ["contradiction", "entailment", "neutral"],
    "qnli": ["entailment", "not_entailment"],
    "rte": ["entailment", "not_entailment"],
    "wnli": ["0", "1"],
    "sts-b": None,
}
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mnli-mm": "mnli", "mnli-m": "mnli"}


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One GLUE example: a text (or pair) and its label (class id, STS-B score, or None for test files)."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: int | float | None = None


def _read_rows(path) -> list[list[str]]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    except UnicodeDecodeError as e:
        raise DataFormatError(path, None, f"not UTF-8 ({e})") from e
    except csv.Error as e:
        raise DataFormatError(path, None, f"TSV error: {e}") from e


def _layout(task: str, header: list[str]):
    """(has_header, text_a column, text_b column | None, label column | None, columns per row)."""
    first, last = header[0].strip().lower(), header[-1].strip().lower()
    if task == "cola":
        if first == "index":
            return True, 1, None, None, len(header)
        return False, 3, None, 1, 4
    if task == "sst-2":
        return (True, 1, None, None, len(header)) if first == "index" else (True, 0, None, 1, len(header))
    if task == "mrpc":
        return (True, 3, 4, None, len(header)) if first == "index" else (True, 3, 4, 0, len(header))
    if task == "qqp":
        labelled = "is_duplicate" in [h.strip() for h in header]
        return (True, 3, 4, 5, len(header)) if labelled else (True, 1, 2, None, len(header))
    if task == "mnli":
        return True, 8, 9, (len(header) - 1 if last == "gold_label" else None), len(header)
    if task in ("qnli", "rte", "wnli"):
        return True, 1, 2, (len(header) - 1 if last == "label" else None), len(header)
    if task == "sts-b":
        return True, 7, 8, (len(header) - 1 if last == "score" else None), len(header)
    raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(GLUE_LABELS)}")


def read_glue(task: str, path) -> tuple[list[TextExample], list[str] | None]:
    """Read one GLUE TSV file of ``task`` (cola, sst-2, mrpc, qqp, mnli, qnli, rte, wnli, sts-b)."""
    task = _ALIASES.get(task.strip().lower(), task.strip().lower())
    if task not in GLUE_LABELS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(GLUE_LABELS)}")
    label_names = GLUE_LABELS[task]
    rows = _read_rows(path)
    if not rows:
        raise DataFormatError(path, 1, "empty file")
    has_header, col_a, col_b, col_label, width = _layout(task, rows[0])
    needed = max(c for c in (col_a, col_b, col_label) if c is not None) + 1
    if width < needed:
        raise DataFormatError(path, 1, f"{task} header has {width} columns, expected at least {needed}: {rows[0]!r}")
    stem = pathlib.Path(os.fspath(path)).stem
    examples = []
    start = 1 if has_header else 0
    for line_no, row in enumerate(rows[start:], start + 1):
        if len(row) != width:
            raise DataFormatError(path, line_no, f"expected {width} tab-separated columns, found {len(row)}")
        label = None
        if col_label is not None:
            raw = row[col_label].strip()
            if label_names is None:
                try:
                    label = float(raw)
                except ValueError:
                    raise DataFormatError(path, line_no, f"score {raw!r} is not a number") from None
            elif raw in label_names:
                label = label_names.index(raw)
            else:
                raise DataFormatError(path, line_no, f"unknown {task} label {raw!r}; expected one of {label_names}")
        examples.append(TextExample(f"{stem}-{len(examples)}", row[col_a], row[col_b] if col_b is not None else None,
                                    label))
    return examples, label_names
