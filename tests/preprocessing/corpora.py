"""Every text of every corpus in ../shared/data, one string each, for tokenizer comparisons."""

from __future__ import annotations

import csv
import json
import pathlib


def _tsv_column(path, column, skip_header=True):
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r[column] for r in rows[1 if skip_header else 0:] if len(r) > abs(column)]


def _jsonl_choices(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            item = json.loads(line)
            out.append(item["question"]["stem"])
            out.extend(c["text"] for c in item["question"]["choices"])
    return out


def _lines(path):
    return [line.rstrip("\r\n") for line in open(path, encoding="utf-8", newline="") if line.strip()]


def corpora(data: pathlib.Path) -> dict[str, list[str]]:
    out = {}
    out["sst2"] = _tsv_column(data / "SST-2/train.tsv", 0) + _tsv_column(data / "SST-2/dev.tsv", 0)
    out["mrpc"] = [s for col in (3, 4) for s in _tsv_column(data / "MRPC/train.tsv", col)]
    squad = json.loads((data / "squad/train-split-v1.1.json").read_text(encoding="utf-8"))
    out["squad"] = [text for article in squad["data"] for p in article["paragraphs"]
                    for text in [p["context"]] + [q["question"] for q in p["qas"]]]
    conll = []
    for split in ("train", "valid"):
        sentence = []
        for line in open(data / f"conll2003/{split}.txt", encoding="utf-8"):
            if not line.strip() or line.startswith("-DOCSTART-"):
                if sentence:
                    conll.append(" ".join(sentence))
                sentence = []
            else:
                sentence.append(line.split(" ")[0])
    out["conll"] = conll
    out["wikitext"] = _lines(data / "wikitext-2/wiki.test.raw") + _lines(data / "wikitext-2/valid.txt")
    out["gutenberg"] = _lines(data / "gutenberg/1342-0.txt") + _lines(data / "gutenberg/11-0.txt")
    out["openbookqa"] = _jsonl_choices(data / "openbookqa/train.jsonl") + _jsonl_choices(data / "openbookqa/dev.jsonl")
    out["arc"] = [t for p in sorted((data / "arc").glob("*/*.jsonl")) for t in _jsonl_choices(p)]
    out["commonsenseqa"] = [t for p in sorted((data / "commonsenseqa").glob("*.jsonl")) for t in _jsonl_choices(p)]
    out["tinyshakespeare"] = _lines(data / "tinyshakespeare/input.txt")
    return out
