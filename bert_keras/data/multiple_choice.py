"""Multiple-choice readers: SWAG csv files and OpenBookQA / ARC / CommonsenseQA jsonl.

SWAG (rowanz/swagaf ``data/``), comma-separated, Python-csv quoting, header-driven (columns are
looked up by name, so the leading unnamed pandas index column of ``val.csv``/``test.csv`` is fine):

* regular ``train.csv``/``val.csv``: ``,video-id,fold-ind,startphrase,sent1,sent2,gold-source,
  ending0..ending3,label``; ``test.csv``: the same without ``label`` (examples get ``label=None``).
* full ``*_full.csv``: ``video-id,fold-ind,startphrase,gold-ending,distractor-0..3,gold-source,
  gold-type,distractor-0..3-type,sent1,sent2``. Some distractor slots are empty (3 or 4
  distractors per row). A 4-choice example is built from the gold ending plus the **first three
  non-empty distractors** in column order (swagaf's README: a 4th distractor, when present, is
  usually of lower quality; on the published rows this reproduces the regular file's wrong
  endings). The gold ending is choice 0 unless ``shuffle_seed`` is given, in which case the four
  choices are permuted with ``random.Random(f"{shuffle_seed}-{fold-ind}")`` and ``label`` follows.

Pairing (``pair=``): ``"sent1"`` (default) is the SWAG reference pairing (swagaf's baselines with
``USE_S1``, HF/pytorch-pretrained-BERT ``run_swag``): ``context = sent1`` and each choice is
``sent2 + " " + ending``. ``"startphrase"`` gives ``context = startphrase`` and the bare endings.
``id`` is ``fold-ind`` (as ``run_swag``'s ``swag_id``).

jsonl (one object per line): ``{"id", "question": {"stem", "choices": [{"text", "label"}, ...]},
"answerKey"?}``. OpenBookQA has 4 choices A-D, CommonsenseQA 5 choices A-E; ARC mostly 4 but some
3 or 5, and some use labels ``1``-``4``. ``label`` is the position of ``answerKey`` among the
choices' labels (so numeric labels need no mapping) or ``None`` without an ``answerKey``.
``num_choices=k`` keeps only items with exactly ``k`` choices (ARC with a fixed 4-way head).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import random

from bert_keras.data.errors import DataFormatError
from bert_keras.data.text_files import open_text


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
    """One multiple-choice question: a context, its candidate endings and the right ending's index (or None)."""

    id: str
    context: str
    endings: list[str]
    label: int | None = None


_REGULAR = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3"]
_FULL = ["video-id", "fold-ind", "startphrase", "gold-ending", "sent1", "sent2",
         "distractor-0", "distractor-1", "distractor-2", "distractor-3"]


def _pair(row, endings, pair):
    if pair == "sent1":
        return row["sent1"], [f"{row['sent2']} {ending}" for ending in endings]
    return row["startphrase"], list(endings)


def read_swag(path, *, pair: str = "sent1", shuffle_seed=None) -> list[ChoiceExample]:
    """Read a SWAG csv in the regular, test or full layout (detected from the header)."""
    if pair not in ("sent1", "startphrase"):
        raise ValueError(f"pair must be 'sent1' or 'startphrase', got {pair!r}")
    examples = []
    with open_text(path, newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise DataFormatError(path, 1, "empty file") from None
        full = "gold-ending" in header
        required = _FULL if full else _REGULAR
        missing = [name for name in required if name not in header]
        if missing:
            raise DataFormatError(path, 1, f"SWAG header lacks columns {missing}")
        labelled = "label" in header
        try:
            for raw in reader:
                line = reader.line_num
                if len(raw) != len(header):
                    raise DataFormatError(path, line, f"expected {len(header)} columns, found {len(raw)}")
                row = dict(zip(header, raw))
                if full:
                    distractors = [row[f"distractor-{i}"] for i in range(4) if row[f"distractor-{i}"].strip()]
                    if len(distractors) < 3:
                        raise DataFormatError(path, line, f"only {len(distractors)} non-empty distractors (need 3)")
                    endings, label = [row["gold-ending"]] + distractors[:3], 0
                    if shuffle_seed is not None:
                        order = list(range(4))
                        random.Random(f"{shuffle_seed}-{row['fold-ind']}").shuffle(order)
                        endings, label = [endings[i] for i in order], order.index(0)
                else:
                    endings = [row[f"ending{i}"] for i in range(4)]
                    label = None
                    if labelled:
                        if row["label"].strip() not in ("0", "1", "2", "3"):
                            raise DataFormatError(path, line, f"label {row['label']!r} is not 0-3")
                        label = int(row["label"])
                context, endings = _pair(row, endings, pair)
                examples.append(ChoiceExample(row["fold-ind"], context, endings, label))
        except csv.Error as e:
            raise DataFormatError(path, reader.line_num, f"csv error: {e}") from e
    return examples


def read_choice_jsonl(path, *, num_choices: int | None = None) -> list[ChoiceExample]:
    """Read OpenBookQA / ARC / CommonsenseQA jsonl; ``context`` is the question stem."""
    examples = []
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(path, line_no, f"invalid JSON: {e.msg} (column {e.colno})") from e
            try:
                question = item["question"]
                choices = question["choices"]
                texts = [choice["text"] for choice in choices]
                labels = [str(choice["label"]) for choice in choices]
                stem, qid = question["stem"], str(item["id"])
            except (KeyError, TypeError) as e:
                raise DataFormatError(path, line_no, f"missing or malformed field {e}") from None
            if not choices:
                raise DataFormatError(path, line_no, "no choices")
            if num_choices is not None and len(choices) != num_choices:
                continue
            label = None
            if "answerKey" in item:
                key = str(item["answerKey"]).strip()
                if key not in labels:
                    raise DataFormatError(path, line_no, f"answerKey {key!r} is not among the choice labels {labels}")
                label = labels.index(key)
            examples.append(ChoiceExample(qid, stem, texts, label))
    return examples
