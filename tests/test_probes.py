"""Layer probes (bert_keras.probes): the Keras softmax-regression probe scores within 0.5 point of scikit-learn's
LogisticRegression with the same L2 (C = 1 / (2 l2 N)) on the same standardised features: real MiniLM first-piece
features of CoNLL-2003 POS tags when ../shared/data has CoNLL-2003, else of a synthetic tagged corpus; and the
probe command end to end on a small synthetic CoNLL-2003 folder with bert_tiny (random weights)."""

import json
import random
import warnings

import numpy as np
import pytest

from bert_keras.probes import default_conll_dir, probe_conll2003, sklearn_c, train_probe
from conftest import shared_data_dir

NOUNS = ["cat", "dog", "bank", "river", "unbelievability", "report", "market", "Zürich", "Paris", "team"]
VERBS = ["runs", "reports", "banks", "markets", "sees", "teams", "rivers"]          # several double as nouns
ADJS = ["big", "naïve", "small", "quick", "red"]


def synthetic_conll(path, sentences: int, seed: int) -> None:
    """A CoNLL-2003-format file of random DT (JJ) NN VBZ DT NN . sentences; words such as "reports" are NN or
    VBZ by position."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(sentences):
        words = [("The", "DT", "B-NP", "O")]
        if rng.random() < 0.5:
            words.append((rng.choice(ADJS), "JJ", "I-NP", "O"))
        noun = rng.choice(NOUNS)
        words += [(noun, "NN", "I-NP", "B-LOC" if noun in ("Zürich", "Paris") else "O"),
                  (rng.choice(VERBS), "VBZ", "B-VP", "O"), ("a", "DT", "B-NP", "O"),
                  (rng.choice(VERBS[1:] + NOUNS[:4]), "NN", "I-NP", "O"), (".", ".", "O", "O")]
        lines += [" ".join(w) for w in words] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_keras_probe_matches_sklearn_logistic_regression(minilm_dir, tmp_path):
    from sklearn.linear_model import LogisticRegression

    from bert_keras.data.conll import read_conll2003
    from bert_keras.features import word_features
    from bert_keras.loading import load_backbone
    shared = shared_data_dir()
    if shared is not None and (shared / "conll2003" / "train.txt").exists():
        sentences = read_conll2003(shared / "conll2003" / "train.txt")[:450]
    else:
        synthetic_conll(tmp_path / "train.txt", 450, seed=1)
        sentences = read_conll2003(tmp_path / "train.txt")
    encoder, preprocessor = load_backbone(minilm_dir)
    out = word_features(encoder, preprocessor, [list(s.tokens) for s in sentences], layers=[4])   # one: ~1 min
    classes = sorted({t for s in sentences for t in s.pos_tags})
    y = np.array([classes.index(sentences[t].pos_tags[w]) for t, w in zip(out.text_index, out.word_index)])
    train = out.text_index < 300                                   # sentences 0-299 train, 300-449 score
    l2 = 1e-3
    for layer in range(1):
        x = out.features[:, layer]
        probe = train_probe(x[train], y[train], len(classes), l2=l2)
        ours = float((np.argmax(probe.predict(x[~train], verbose=0), -1) == y[~train]).mean())
        mean, std = x[train].mean(0), x[train].std(0)
        std = np.where(std > 0, std, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                        # lbfgs' ConvergenceWarning at max_iter
            reference = LogisticRegression(C=sklearn_c(l2, int(train.sum())), max_iter=300).fit(
                (x[train] - mean) / std, y[train])
        theirs = float((reference.predict((x[~train] - mean) / std) == y[~train]).mean())
        print(f"hidden state 4: keras {ours:.4f} sklearn {theirs:.4f} ({int((~train).sum())} words)")
        assert abs(ours - theirs) <= 0.005, (layer, ours, theirs)
        assert ours > 0.5


def test_probe_command_end_to_end(tmp_path, minilm_vocab, capsys):
    from bert_keras_cli.main import main
    data = tmp_path / "conll2003"
    data.mkdir()
    synthetic_conll(data / "train.txt", 120, seed=2)
    synthetic_conll(data / "valid.txt", 30, seed=3)
    out = tmp_path / "probe"
    assert main(["probe", "--task", "conll2003", "--label", "ner", "--out", str(out), "--model", "bert_tiny",
                 "--vocab", minilm_vocab, "--data", str(data), "--train-sentences", "80", "--test-sentences", "40",
                 "--epochs", "3", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "valid acc" in printed and "layer 2" in printed
    result = json.loads((out / "probe.json").read_text())
    assert [e["layer"] for e in result["layers"]] == [0, 1, 2]
    for entry in result["layers"]:
        assert {"valid_accuracy", "test_accuracy", "valid_f1", "test_f1"} <= set(entry)
        assert 0 <= entry["valid_accuracy"] <= 1
    settings = result["settings"]
    assert settings["label"] == "ner" and settings["train_sentences"] == 80 and settings["l2"] == 1e-3
    assert settings["test"] == "train.txt sentences 80..119" and settings["classes"] == ["B-LOC", "O"]
    assert (out / "probe.png").read_bytes()[:4] == b"\x89PNG"


def test_probe_refuses_bad_input(tmp_path, minilm_vocab, capsys):
    from bert_keras_cli.main import main
    assert main(["probe", "--label", "pos", "--out", str(tmp_path / "p"), "--data", str(tmp_path)]) == 2
    assert "no CoNLL-2003 train.txt and valid.txt in" in capsys.readouterr().err
    synthetic_conll(tmp_path / "train.txt", 10, seed=1)
    synthetic_conll(tmp_path / "valid.txt", 10, seed=1)
    assert main(["probe", "--label", "pos", "--out", str(tmp_path / "p"), "--data", str(tmp_path), "--model",
                 "bert_tiny", "--vocab", minilm_vocab, "--train-sentences", "8"]) == 2
    assert "train.txt has 10 sentences" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown probe label 'lemma'"):
        probe_conll2003(None, None, "lemma", data_dir=str(tmp_path))
    assert default_conll_dir().endswith("conll2003")
    assert not (tmp_path / "p").exists()
