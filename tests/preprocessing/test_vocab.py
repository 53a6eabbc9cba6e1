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
