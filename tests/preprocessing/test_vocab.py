import re
import time

import pytest
import tensorflow as tf

from bert_keras_cli.main import main
from bert_keras.preprocessing import BertPreprocessor, load_vocab

TEXT = """The quick brown fox jumps over the lazy dog.
Café owners in Zürich serve coffee; the café is busy.
Jumping foxes and lazy dogs: a classic sentence for typing practice!
""" * 50


def test_cli_builds_a_vocab_that_covers_its_corpus(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "vocab.txt"
    assert main(["vocab", str(corpus), "--out", str(out), "--size", "400"]) == 0
    tokens = load_vocab(str(out))
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "cafe" in tokens and "Café" not in tokens              # uncased: lower-cased, accents stripped
    pre = BertPreprocessor(str(out))
    ids = pre.tokenize(tf.constant(TEXT.splitlines()[:3])).flat_values.numpy()
    assert tokens.index("[UNK]") not in ids.tolist()


def test_vocab_errors(tmp_path, capsys):
    assert main(["vocab", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "v.txt")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="special tokens"):
        load_vocab(["a", "b"])
    with pytest.raises(ValueError, match="repeats"):
        load_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"])


def _alphabet_size(text: str) -> int:
    """TF.Text's learner's smallest vocabulary, counted without it: the 5 special tokens and every character of the
    lower-cased, accent-stripped text (spaces aside), alone and as a "##" continuation."""
    import unicodedata
    chars = {c for c in unicodedata.normalize("NFD", text.lower()) if not c.isspace()
             and unicodedata.category(c) != "Mn"}
    return 5 + 2 * len(chars)


def test_a_size_under_the_alphabet_is_refused_and_nothing_is_written(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "vocab.txt"
    assert main(["vocab", str(corpus), "--out", str(out), "--size", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give a size of" in err[0]
    least = int(re.search(r"give a size of (\d+)", err[0]).group(1))
    # The alphabet, and the few words common enough to survive the learner's highest count threshold ("the").
    assert _alphabet_size(TEXT) <= least <= _alphabet_size(TEXT) + 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_a_vocabulary_short_of_its_size_says_how_many_it_wrote(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "vocab.txt"
    assert main(["vocab", str(corpus), "--out", str(out), "--size", "5000"]) == 0      # far more than it holds
    written = len(out.read_text(encoding="utf-8").splitlines())
    printed = capsys.readouterr().out
    assert f"{written:,} tokens" in printed and f"{5000 - written:,} fewer than --size 5,000" in printed


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab_file(tmp_path, lines, name="vocab.txt"):
    path = tmp_path / name
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    return str(path)


@pytest.mark.parametrize("bad, line, words", [
    ("", 7, "a blank line"),
    ("wall\0\0\0s", 7, "U+0000"),                     # TF Text's FastWordpiece builder raised RuntimeError on it
    ("tab\there", 7, "U+0009"),
    ("bell\x1c", 7, "U+001C"),                        # str.splitlines() would have split the line here
])
def test_a_blank_line_or_a_control_character_is_refused_by_its_line(tmp_path, bad, line, words):
    path = _vocab_file(tmp_path, SPECIALS + ["a", bad, "b"])
    with pytest.raises(ValueError) as caught:
        load_vocab(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line {line}: ") and words in message and "\n" not in message


def test_lines_are_split_on_newlines_only_and_a_crlf_file_reads_the_same(tmp_path):
    lines = SPECIALS + ["a", "b\u00e9", "##c"]
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    assert load_vocab(str(crlf)) == lines == load_vocab(_vocab_file(tmp_path, lines))


def test_repeated_tokens_in_a_30k_vocabulary_are_named_by_line_at_once(tmp_path):
    tokens = SPECIALS + [f"w{i}" for i in range(30_000)]
    path = _vocab_file(tmp_path, tokens + tokens[2000:2100])      # 100 repeats at the end (the fuzzer's case)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=rf"repeats 100 token\(s\), the first 'w1995' at line {len(tokens) + 1} "
                                         r"\(also line 2001\)"):
        load_vocab(path)
    assert time.perf_counter() - start < 2                          # tokens.count each: minutes


def test_a_folder_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=f"^vocabulary {re.escape(str(tmp_path))} is a folder: give its vocab.txt"):
        load_vocab(str(tmp_path))


def test_a_token_list_is_checked_by_id():
    with pytest.raises(ValueError, match=r"^vocabulary token id 6: a blank line"):
        load_vocab(SPECIALS + ["a", ""])


def test_a_token_over_tf_texts_256_bytes_and_a_vocabulary_of_special_tokens_only_are_refused(tmp_path):
    load_vocab(SPECIALS + ["##" + "x" * 256])                       # 256 bytes after ##: TF Text takes it
    path = _vocab_file(tmp_path, SPECIALS + ["a", "x" * 257])
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}, line 7: a token of 257 bytes .* at most 256 bytes"):
        load_vocab(path)
    with pytest.raises(ValueError, match="holds only special tokens \\(5\\)"):
        load_vocab(SPECIALS)
