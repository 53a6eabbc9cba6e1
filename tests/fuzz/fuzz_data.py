"""Mutated data files for every data format the CLI reads, each given to every command that reads that format.

The mutations (MUTATIONS, any format; FORMAT_MUTATIONS, one format's contradicting fields) take the good file's
bytes and a `random.Random` seeded by the case id, so an id rebuilds its file:

- truncated (at a random byte), empty, header only, one huge line (200,000 characters in a field), binary
  garbage, invalid UTF-8 bytes, Latin-1 text, UTF-16, NUL bytes, a UTF-8 BOM, CRLF line ends, blank lines;
- swapped columns (header and rows, or the rows only), a missing column (everywhere, or in one row), an extra
  column in one row;
- contradicting fields: a label outside the label set, a pair task with one text column, a score that is not a
  number, SQuAD answers whose answer_start does not point at their text (shifted by 7, 1,000,000, negative),
  answers not in the context, an answer list empty without is_impossible, a multiple-choice answer that is no
  choice, a CoNLL tag outside the tag set, a vocabulary without [CLS]/[SEP]/[UNK] or with duplicates, records
  longer than the --max-seq-length asked for.

    cases = data_cases(variants=3)
"""

from __future__ import annotations

import json
import random

from fuzz_cases import Case

FT = ("finetune", "--model", "bert_tiny", "--vocab", "{vocab}", "--out", "{out}", "--epochs", "1", "--batch-size",
      "2", "--max-train-examples", "4", "--quiet")
SQUAD_FLAGS = ("--max-seq-length", "48", "--max-query-length", "8", "--doc-stride", "16")

# format: (the good input it mutates, its kind, {command id: (argv with {F}, heavy)})
FORMATS = {
    "sst-2": ("sst2.tsv", "tsv", {
        "finetune-sst-2-train": ((*FT, "--task", "sst-2", "--max-seq-length", "16", "--train", "{F}"), True),
        "finetune-sst-2-eval": ((*FT, "--task", "sst-2", "--max-seq-length", "16", "--train", "{sst2.tsv}",
                                 "--eval", "{F}"), True)}),
    "mrpc": ("mrpc.tsv", "tsv", {
        "finetune-mrpc-train": ((*FT, "--task", "mrpc", "--max-seq-length", "24", "--train", "{F}"), True)}),
    "sts-b": ("stsb.tsv", "tsv", {
        "finetune-sts-b-train": ((*FT, "--task", "sts-b", "--max-seq-length", "24", "--train", "{F}"), True)}),
    "squad": ("squad.json", "json", {
        "finetune-squad-train": ((*FT, "--task", "squad", *SQUAD_FLAGS, "--train", "{F}"), True),
        "finetune-squad-eval": ((*FT, "--task", "squad", *SQUAD_FLAGS, "--train", "{squad.json}", "--eval", "{F}"),
                                True)}),
    "swag": ("swag.csv", "csv", {
        "finetune-swag-train": ((*FT, "--task", "swag", "--max-seq-length", "24", "--train", "{F}"), True)}),
    "openbookqa": ("obqa.jsonl", "jsonl", {
        "finetune-openbookqa-train": ((*FT, "--task", "openbookqa", "--max-seq-length", "16", "--train", "{F}"),
                                      True)}),
    "conll": ("conll.txt", "conll", {
        "finetune-conll2003-train": ((*FT, "--task", "conll2003", "--max-seq-length", "16", "--train", "{F}"), True),
        "finetune-conll2003-eval": ((*FT, "--task", "conll2003", "--max-seq-length", "16", "--train",
                                     "{conll.txt}", "--eval", "{F}"), True),
        "probe-train": (("probe", "--label", "ner", "--model", "bert_tiny", "--vocab", "{vocab}", "--data", "{F}",
                         "--out", "{out}", "--train-sentences", "4", "--valid-sentences", "2", "--test-sentences",
                         "2", "--epochs", "1", "--quiet"), True)}),
    "text": ("corpus.txt", "text", {
        "vocab": (("vocab", "{F}", "--out", "{out}.txt", "--size", "200"), False),
        "pretraining-data": (("pretraining-data", "{F}", "--vocab", "{vocab}", "--out", "{out}/r", "--workers", "1",
                              "--dupe-factor", "1", "--max-seq-length", "16", "--quiet"), False),
        "pretrain-text": (("pretrain", "--model", "bert_tiny", "--vocab", "{vocab}", "--text", "{F}", "--train-steps",
                           "2", "--save-every", "2", "--batch-size", "2", "--max-seq-length", "16", "--out", "{out}",
                           "--quiet"), True),
        "features": (("features", "{F}", "--model", "bert_tiny", "--vocab", "{vocab}", "--out", "{out}.npz",
                      "--max-seq-length", "16"), False)}),
    "vocab": ("vocab", "vocab", {
        "finetune-vocab": ((*FT[:3], "{F}", *FT[5:], "--task", "sst-2", "--max-seq-length", "16", "--train",
                            "{sst2.tsv}"), True),
        "pretraining-data-vocab": (("pretraining-data", "{corpus.txt}", "--vocab", "{F}", "--out", "{out}/r",
                                    "--workers", "1", "--dupe-factor", "1", "--max-seq-length", "16", "--quiet"),
                                   False),
        "fill-mask-vocab": (("fill-mask", "--model", "bert_tiny", "--vocab", "{F}", "a [MASK] b"), False),
        "features-vocab": (("features", "{corpus.txt}", "--model", "bert_tiny", "--vocab", "{F}", "--out",
                            "{out}.npz", "--max-seq-length", "16"), False)}),
    "records": ("records", "records", {
        "pretrain-records": (("pretrain", "--model", "bert_tiny", "--vocab", "{vocab}", "--records", "{F}",
                              "--train-steps", "2", "--save-every", "2", "--batch-size", "2", "--out", "{out}",
                              "--quiet"), True),
        "pretrain-records-longer-flag": (("pretrain", "--model", "bert_tiny", "--vocab", "{vocab}", "--records",
                                          "{F}", "--max-seq-length", "32", "--train-steps", "2", "--save-every",
                                          "2", "--batch-size", "2", "--out", "{out}", "--quiet"), True)}),
    "batching": ("batching.txt", "proto", {
        "serve-batching": (("serve", "{out}/none", "--enable_batching", "--batching_parameters_file", "{F}"),
                           False)}),
}
HEADED = ("tsv", "csv")                    # a first line that is a header
LINES = ("tsv", "csv", "jsonl", "conll", "text", "vocab", "proto")


def _text(data: bytes) -> str:
    return data.decode("utf-8")


def _rows(data: bytes, sep: str) -> list[list[str]]:
    return [line.split(sep) for line in _text(data).splitlines()]


def _unrows(rows, sep: str) -> bytes:
    return ("\n".join(sep.join(r) for r in rows) + "\n").encode("utf-8")


def _sep(kind: str) -> str:
    return "\t" if kind == "tsv" else ","


def truncated(data, rng, kind):
    return data[:rng.randrange(1, len(data))]


def empty(data, rng, kind):
    return b""


def header_only(data, rng, kind):
    return data.split(b"\n")[0] + b"\n" if kind in HEADED else None


def huge_line(data, rng, kind):
    """200,000 characters of words in one field of a random data line."""
    if kind not in LINES:
        return None
    lines = _text(data).split("\n")
    i = rng.randrange(1 if kind in HEADED else 0, max(2, len(lines) - 1))
    words = ("word " * 40_000).strip()
    if kind in HEADED:
        cells = lines[i].split(_sep(kind))
        j = rng.randrange(len(cells))
        cells[j] = words
        lines[i] = _sep(kind).join(cells)
    elif kind == "conll":
        lines[i] = f"{'x' * 200_000} NN B-NP O"
    else:
        lines[i] = words
    return "\n".join(lines).encode("utf-8")


def binary_garbage(data, rng, kind):
    return bytes(rng.randrange(256) for _ in range(3000))


def invalid_bytes(data, rng, kind):
    i = rng.randrange(len(data))
    return data[:i] + b"\xff\xfe" + data[i:]


def latin1(data, rng, kind):
    lines = _text(data).split("\n")
    i = rng.randrange(max(1, len(lines) - 1))
    lines[i] = lines[i].replace(" ", " café ", 1) if " " in lines[i] else lines[i] + "é"
    return "\n".join(lines).encode("latin-1", "replace")


def utf16(data, rng, kind):
    return _text(data).encode("utf-16")


def nul_bytes(data, rng, kind):
    i = rng.randrange(len(data))
    return data[:i] + b"\x00" * 3 + data[i:]


def bom(data, rng, kind):
    return b"\xef\xbb\xbf" + data


def crlf(data, rng, kind):
    return data.replace(b"\n", b"\r\n") if kind in LINES or kind == "json" else None


def blank_lines(data, rng, kind):
    if kind not in LINES:
        return None
    lines = _text(data).split("\n")
    i = rng.randrange(1, max(2, len(lines)))
    return "\n".join(lines[:i] + ["", "", ""] + lines[i:]).encode("utf-8")


def swapped_columns(data, rng, kind):
    """Two columns swapped in the header and every row (the same data in another column order)."""
    if kind not in HEADED:
        return None
    rows = _rows(data, _sep(kind))
    i, j = rng.sample(range(len(rows[0])), 2)
    for r in rows:
        if len(r) > max(i, j):
            r[i], r[j] = r[j], r[i]
    return _unrows(rows, _sep(kind))


def swapped_values(data, rng, kind):
    """Two columns swapped in the data rows only: a header that no longer says what the rows hold."""
    if kind not in HEADED:
        return None
    rows = _rows(data, _sep(kind))
    i, j = rng.sample(range(len(rows[0])), 2)
    for r in rows[1:]:
        if len(r) > max(i, j):
            r[i], r[j] = r[j], r[i]
    return _unrows(rows, _sep(kind))


def missing_column(data, rng, kind):
    if kind not in HEADED:
        return None
    rows = _rows(data, _sep(kind))
    i = rng.randrange(len(rows[0]))
    return _unrows([r[:i] + r[i + 1:] for r in rows], _sep(kind))


def missing_cell(data, rng, kind):
    """One data row a column short."""
    if kind not in HEADED:
        return None
    rows = _rows(data, _sep(kind))
    k = rng.randrange(1, len(rows))
    rows[k] = rows[k][:-1]
    return _unrows(rows, _sep(kind))


def extra_cell(data, rng, kind):
    if kind not in HEADED:
        return None
    rows = _rows(data, _sep(kind))
    k = rng.randrange(1, len(rows))
    rows[k] = rows[k] + ["extra"]
    return _unrows(rows, _sep(kind))


MUTATIONS = {"truncated": truncated, "empty": empty, "header-only": header_only, "huge-line": huge_line,
             "binary-garbage": binary_garbage, "invalid-bytes": invalid_bytes, "latin-1": latin1, "utf-16": utf16,
             "nul-bytes": nul_bytes, "bom": bom, "crlf": crlf, "blank-lines": blank_lines,
             "swapped-columns": swapped_columns, "swapped-values": swapped_values, "missing-column": missing_column,
             "missing-cell": missing_cell, "extra-cell": extra_cell}
RANDOMIZED = {"truncated", "huge-line", "binary-garbage", "invalid-bytes", "latin-1", "nul-bytes", "blank-lines",
              "swapped-columns", "swapped-values", "missing-column", "missing-cell", "extra-cell"}


# Contradicting fields, per format: (name, mutate(text, rng) -> text).
def _tsv_label(value):
    def mutate(text, rng):
        rows = [line.split("\t") for line in text.splitlines()]
        k = rng.randrange(1, len(rows))
        rows[k][-1] = value
        return "\n".join("\t".join(r) for r in rows) + "\n"
    return mutate


def _tsv_drop(name):
    def mutate(text, rng):
        rows = [line.split("\t") for line in text.splitlines()]
        i = rows[0].index(name)
        return "\n".join("\t".join(r[:i] + r[i + 1:]) for r in rows) + "\n"
    return mutate


def _squad(change):
    def mutate(text, rng):
        d = json.loads(text)
        qas = [qa for p in d["data"][0]["paragraphs"] for qa in p["qas"]]
        change(d, rng.choice(qas), rng)
        return json.dumps(d)
    return mutate


def _shift(by):
    def change(d, qa, rng):
        qa["answers"][0]["answer_start"] += by
    return change


def _set_start(value):
    def change(d, qa, rng):
        qa["answers"][0]["answer_start"] = value
    return change


def _jsonl(change):
    def mutate(text, rng):
        items = [json.loads(line) for line in text.splitlines()]
        change(rng.choice(items))
        return "\n".join(json.dumps(i) for i in items) + "\n"
    return mutate


def _lines(change):
    def mutate(text, rng):
        lines = text.splitlines()
        return "\n".join(change(lines, rng)) + "\n"
    return mutate


def _conll_tag(lines, rng):
    i = rng.choice([k for k, line in enumerate(lines) if line and not line.startswith("-DOCSTART-")])
    lines[i] = " ".join(lines[i].split()[:3] + ["B-XYZ"])
    return lines


def _conll_fields(lines, rng):
    i = rng.choice([k for k, line in enumerate(lines) if line and not line.startswith("-DOCSTART-")])
    lines[i] = " ".join(lines[i].split()[:3])
    return lines


def _vocab_without(tokens):
    return lambda lines, rng: [t for t in lines if t not in tokens]


FORMAT_MUTATIONS = {
    "sst-2": {"label-outside-set": _tsv_label("7"), "label-empty": _tsv_label(""),
              "label-is-text": _tsv_label("positive")},
    "mrpc": {"label-outside-set": _tsv_label("2"), "pair-with-one-column": _tsv_drop("#2 String")},
    "sts-b": {"score-not-a-number": _tsv_label("high"), "score-nan": _tsv_label("nan"),
              "score-out-of-range": _tsv_label("-40"), "pair-with-one-column": _tsv_drop("sentence2")},
    "squad": {"answer-start-shifted-7": _squad(_shift(7)), "answer-start-1000000": _squad(_set_start(1_000_000)),
              "answer-start-negative": _squad(_set_start(-3)),
              "answer-start-not-a-number": _squad(_set_start("x")),
              "answer-not-in-context": _squad(lambda d, qa, rng: qa["answers"][0].update(text="zebra crossing")),
              "no-answers-not-impossible": _squad(lambda d, qa, rng: qa.update(answers=[])),
              "impossible-with-answers": _squad(lambda d, qa, rng: qa.update(is_impossible=True)),
              "context-missing": _squad(lambda d, qa, rng: d["data"][0]["paragraphs"][0].pop("context")),
              "data-not-a-list": lambda text, rng: json.dumps({"version": "1.1", "data": {"title": "t"}}),
              "question-empty": _squad(lambda d, qa, rng: qa.update(question=""))},
    "swag": {"label-outside-set": lambda text, rng: text.replace(",3\n", ",7\n"),
             "ending-missing": lambda text, rng: text.replace("ending3,", "ending_3,", 1)},
    "openbookqa": {"answer-key-not-a-choice": _jsonl(lambda i: i.update(answerKey="Z")),
                   "no-choices": _jsonl(lambda i: i["question"].update(choices=[])),
                   "one-choice": _jsonl(lambda i: i["question"].update(choices=i["question"]["choices"][:1])),
                   "line-not-json": _lines(lambda lines, rng: lines[:1] + ["{not json"] + lines[1:]),
                   "id-missing": _jsonl(lambda i: i.pop("id"))},
    "conll": {"tag-outside-set": _lines(_conll_tag), "three-fields": _lines(_conll_fields),
              "docstart-only": lambda text, rng: "-DOCSTART- -X- -X- O\n\n"},
    "text": {"blank-lines-only": lambda text, rng: "\n\n\n", "one-word": lambda text, rng: "word\n"},
    "vocab": {"without-special-tokens": _lines(_vocab_without({"[CLS]", "[SEP]", "[UNK]", "[MASK]"})),
              "duplicated-tokens": _lines(lambda lines, rng: lines + lines[1000:1100]),
              "five-tokens": _lines(lambda lines, rng: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
              "tokens-with-spaces": _lines(lambda lines, rng: [t if k % 7 else f"{t} {t}"
                                                                 for k, t in enumerate(lines)])},
    "batching": {"negative-size": lambda text, rng: text.replace("value: 8", "value: -8"),
                 "unknown-field": lambda text, rng: text + "no_such_field { value: 1 }\n",
                 "not-a-proto": lambda text, rng: "max_batch_size = 8 {\n"},
}


def _writer(good: str, kind: str, mutate, case_id: str, folder: bool):
    """prepare(case_dir, inputs): writes the mutated file as case_dir/F (a folder F holding it as train.txt,
    beside a good valid.txt, for commands that read a data folder)."""
    def prepare(case_dir, inputs):
        data = mutate(inputs[good].read_bytes(), random.Random(case_id))
        assert data is not None, f"{case_id}: the mutation does not apply to a {kind} file"
        if folder:
            (case_dir / "F").mkdir()
            (case_dir / "F" / "train.txt").write_bytes(data)
            (case_dir / "F" / "valid.txt").write_bytes(inputs["conll_dir"].joinpath("valid.txt").read_bytes())
        else:
            (case_dir / "F").write_bytes(data)
    return prepare


def _text_mutation(fn):
    return lambda data, rng: fn(data.decode("utf-8"), rng).encode("utf-8")


def data_cases(variants: int = 3) -> list[Case]:
    """Every (format, reading command, mutation) case; the randomized mutations `variants` times each
    (ids end in -0, -1, ...)."""
    cases = []
    for fmt, (good, kind, commands) in FORMATS.items():
        mutations = []
        for name, fn in MUTATIONS.items():
            if kind in ("records",) and name not in ("truncated", "empty", "binary-garbage", "invalid-bytes"):
                continue
            for k in (range(variants) if name in RANDOMIZED else [None]):
                mutations.append((name if k is None else f"{name}-{k}", fn))
        mutations += [(name, fn) for name, fn in FORMAT_MUTATIONS.get(fmt, {}).items()]
        if kind == "records":
            mutations.append(("good", None))
        for command, (argv, heavy) in commands.items():
            for name, fn in mutations:
                case_id = f"{command}-{name}"
                if fn is None:
                    mutate = lambda data, rng: data                        # noqa: E731
                elif fn in MUTATIONS.values():
                    probe = b"a\tb\nc\td\n" if kind == "tsv" else b"a,b\nc,d\n"
                    if fn(probe, random.Random(0), kind) is None:
                        continue                     # does not apply to this kind of file
                    mutate = (lambda f, k: lambda data, rng: f(data, rng, k))(fn, kind)
                else:
                    mutate = _text_mutation(fn)
                cases.append(Case(case_id, argv, _writer(good, kind, mutate, case_id, folder=command == "probe-train"),
                                  heavy=heavy, seconds=40 if heavy else 60))
    return cases
