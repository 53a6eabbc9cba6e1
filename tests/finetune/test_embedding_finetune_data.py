"""The rows `finetune --task embedding` and `--task rerank` read (bert_keras/data/pairs.py): JSONL with any
sentence-transformers column names, TSV with a header, the STS Benchmark's headerless csv (scores / 5, as
sentence-transformers' STSb examples), and bad files refused naming the file and line."""

import csv

import pytest

from bert_keras.data import DataFormatError
from bert_keras.data.pairs import TextRow, read_text_rows


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_columns_in_the_order_written_and_a_score_column(tmp_path):
    rows, columns = read_text_rows(write(tmp_path / "a.jsonl", '{"anchor": "q", "positive": "p", "negative": "n"}\n'
                                                               '\n{"negative": "n2", "anchor": "q2", "positive": "p2"}\n'))
    assert columns == ["anchor", "positive", "negative"]
    assert rows == [TextRow(("q", "p", "n")), TextRow(("q2", "p2", "n2"))]
    rows, columns = read_text_rows(write(tmp_path / "b.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 0.25}\n'))
    assert columns == ["sentence1", "sentence2"] and rows == [TextRow(("a", "b"), 0.25)]


def test_tsv_with_a_header(tmp_path):
    rows, columns = read_text_rows(write(tmp_path / "a.tsv", "query\tpassage\tlabel\nwho?\tAda \"did\".\t1\n"))
    assert columns == ["query", "passage"] and rows == [TextRow(("who?", 'Ada "did".'), 1.0)]


def test_the_sts_benchmark_csv(shared_data):
    path = shared_data / "stsbenchmark" / "sts-dev.csv"
    rows, columns = read_text_rows(path)
    with open(path, encoding="utf-8", newline="") as f:
        lines = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) == len(lines) == 1500 and columns == ["sentence1", "sentence2"]
    for row, line in zip(rows, lines):
        assert row.texts == (line[5], line[6]) and row.score == pytest.approx(float(line[4]) / 5)
    assert min(r.score for r in rows) == 0.0 and max(r.score for r in rows) == 1.0


@pytest.mark.parametrize("name,text,line,words", [
    ("a.jsonl", '{"anchor": "q", "positive": "p"}\n["q", "p"]\n', 2, "not a JSON object"),
    ("a.jsonl", '{"anchor": "q", "positive": "p"}\n{"anchor": "q"}\n', 2, "not the first row's"),
    ("a.jsonl", '{"anchor": "q"}\n', 1, "1 text column(s)"),
    ("a.jsonl", '{"anchor": "q", "positive": 3}\n', 1, "positive is int, not a text"),
    ("a.jsonl", '{"a": "q", "b": "p", "score": "high"}\n', 1, "score 'high' is not a number"),
    ("a.tsv", "who?\tAda did.\n", 1, "no header line"),
    ("a.tsv", "query\tpassage\nwho?\n", 2, "1 tab-separated fields, the header names 2"),
])
def test_bad_rows_name_the_file_and_line(tmp_path, name, text, line, words):
    with pytest.raises(DataFormatError) as caught:
        read_text_rows(write(tmp_path / name, text))
    assert caught.value.line == line and words in str(caught.value) and name in str(caught.value)
