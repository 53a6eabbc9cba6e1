"""GLUE TSV readers (the layouts written by GLUE's ``download_glue_data.py``).

Files are read like google-research/bert's ``run_classifier`` (``csv.reader`` with
``delimiter="\\t"`` and no quote character, i.e. ``QUOTE_NONE``: quotes are ordinary text), as
UTF-8 with an optional BOM (MRPC's header has one; data/text_files.py: a byte that is not UTF-8
is an error naming its line and byte offset). The header is read: the text and label columns
are picked by name (below; case and ``-`` for a space ignored), so columns in another order
work, and a first line that does not name them is an error listing the names expected and
found (a file without its header line is refused, never read with its first row lost). Only
CoLA's GLUE files have no header (4 columns). Every data row must have as many columns as the
header. A header without the label column is a test file when it starts with ``index`` or
``id``, as GLUE's do; otherwise it is refused.

============  =====================================================  ==========================
task          labelled file (columns)                                 test file
============  =====================================================  ==========================
cola          no header: ``source label author_label sentence``       ``index sentence``
sst-2         ``sentence label``                                      ``index sentence``
mrpc          ``Quality #1 ID #2 ID #1 String #2 String``             ``index #1 ID ...``
qqp           ``id qid1 qid2 question1 question2 is_duplicate``       ``id question1 question2``
mnli          12 (train) / 16 (dev) columns: sentence1, sentence2,     no ``gold_label`` column
              ``gold_label``
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
from bert_keras.data.text_files import open_text

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


# The csv module refuses a field over 131,072 characters by default; with QUOTE_NONE a field is text between tabs
# on one line, so a long one is a long text (a document), not quotes run together, and the preprocessor truncates
# it to the sequence length anyway: the reader takes any length (the whole file is in memory already).
_FIELD_LIMIT = 2 ** 31 - 1


def _read_rows(path) -> list[list[str]]:
    limit = csv.field_size_limit(_FIELD_LIMIT)
    try:
        with open_text(path, newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            try:
                return list(reader)
            except csv.Error as e:
                raise DataFormatError(path, reader.line_num, f"TSV error: {e}") from e
    finally:
        csv.field_size_limit(limit)


# The columns read, by their names in GLUE's headers (as GLUE spells them; compared by `_name`): (text_a,
# text_b, label).
_COLUMNS = {
    "cola": ("sentence", None, "label"),
    "sst-2": ("sentence", None, "label"),
    "mrpc": ("#1 String", "#2 String", "Quality"),
    "qqp": ("question1", "question2", "is_duplicate"),
    "mnli": ("sentence1", "sentence2", "gold_label"),
    "qnli": ("question", "sentence", "label"),
    "rte": ("sentence1", "sentence2", "label"),
    "wnli": ("sentence1", "sentence2", "label"),
    "sts-b": ("sentence1", "sentence2", "score"),
}
_TEST_FIRST = ("index", "id")          # GLUE's unlabelled (test) files start with one of these columns
_COLA_NO_HEADER = 4                    # CoLA's train/dev: no header; source, label, author's mark, sentence


def _name(cell: str) -> str:
    """A header cell as compared: case, surrounding spaces and a `-` for a space ignored (`#1-String`)."""
    return " ".join(cell.strip().lower().replace("-", " ").split())


def _layout(task: str, header: list[str], path) -> tuple[bool, int, int | None, int | None, int]:
    """(has_header, text_a column, text_b column | None, label column | None, columns per row): the columns
    the first row names; CoLA's GLUE files have no header (4 columns). Anything else is a DataFormatError
    naming the columns expected and the ones found (a file without its header line is never read as data)."""
    names = [_name(c) for c in header]
    spelled = _COLUMNS[task]
    text_a, text_b, label = (_name(n) if n else None for n in spelled)
    wanted = [n for n in (text_a, text_b) if n]
    if task == "cola" and text_a not in names:
        if len(header) == _COLA_NO_HEADER:
            return False, 3, None, 1, _COLA_NO_HEADER
    found = ", ".join(repr(c) for c in header)
    expected = ", ".join(n for n in spelled if n)
    texts = ", ".join(n for n in spelled[:2] if n)
    missing = [n for n in wanted if n not in names]
    looks_like_data = header[-1].strip() in (GLUE_LABELS[task] or []) or _is_number(header[-1])
    hint = (" (is the header line missing? GLUE's files start with one)" if looks_like_data
            else " (rename the columns in the first line)")
    cola = " or, for CoLA, GLUE's 4 columns without a header (source, label, author's mark, sentence)"
    if missing:
        raise DataFormatError(path, 1, f"not a {task} header: expected columns named {expected} (GLUE's layout; a "
                                       f"test file: {_TEST_FIRST[0]}, {texts})"
                                       f"{cola if task == 'cola' else ''}; found {found}{hint}")
    if label not in names and names[0] not in _TEST_FIRST:
        raise DataFormatError(path, 1, f"no {spelled[2]!r} column in the {task} header (found {found}): name the "
                                       f"labels' column {spelled[2]}; a test file without labels starts with an "
                                       f"{_TEST_FIRST[0]} column, as GLUE's do")
    col_label = names.index(label) if label in names else None
    return (True, names.index(text_a), names.index(text_b) if text_b else None, col_label, len(header))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def glue_segments(task: str) -> int:
    """The texts of one `task` example: 1 (CoLA, SST-2) or 2 (the sentence-pair tasks).

    Args:
        task: a GLUE task name (as read_glue takes it).

    Returns:
        1 or 2.

    Example:
        >>> glue_segments("sst-2"), glue_segments("MRPC")
        (1, 2)
    """
    task = _ALIASES.get(task.strip().lower(), task.strip().lower())
    if task not in GLUE_LABELS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(GLUE_LABELS)}")
    return 1 if _COLUMNS[task][1] is None else 2


def read_glue(task: str, path) -> tuple[list[TextExample], list[str] | None]:
    """Read one GLUE TSV file of ``task`` (cola, sst-2, mrpc, qqp, mnli, qnli, rte, wnli, sts-b)."""
    task = _ALIASES.get(task.strip().lower(), task.strip().lower())
    if task not in GLUE_LABELS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(GLUE_LABELS)}")
    label_names = GLUE_LABELS[task]
    rows = _read_rows(path)
    if not rows:
        raise DataFormatError(path, 1, "empty file")
    has_header, col_a, col_b, col_label, width = _layout(task, rows[0], path)
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
