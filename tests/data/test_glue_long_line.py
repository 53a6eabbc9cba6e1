"""A TSV line longer than the csv module's default field limit (131,072 characters) is read whole (issue 55): with
GLUE's QUOTE_NONE a field is the text between tabs on one line, so a long field is a long text, which the
preprocessor truncates to the sequence length; the reader leaves the process's csv limit as it found it."""

import csv

from bert_keras.data import read_glue


def test_a_200000_character_line_is_read_whole(tmp_path):
    long_text = " ".join(f"word{i}" for i in range(30_000))[:200_000]
    assert len(long_text) == 200_000 and csv.field_size_limit() == 131_072
    path = tmp_path / "train.tsv"
    path.write_text(f"sentence\tlabel\nshort one\t0\n{long_text}\t1\nlast\t0\n", encoding="utf-8")
    examples, labels = read_glue("sst-2", path)
    assert [len(e.text_a) for e in examples] == [9, 200_000, 4] and examples[1].text_a == long_text
    assert [e.label for e in examples] == [0, 1, 0] and labels == ["0", "1"]
    assert csv.field_size_limit() == 131_072
