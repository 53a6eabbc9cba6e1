from pathlib import Path

import keras
import numpy as np

from bert_keras import load_checkpoint
from bert_keras_cli.main import main


def test_convert_writes_a_keras_file_and_a_tf1_checkpoint(minilm_dir, tmp_path):
    out, tf1 = tmp_path / "minilm.keras", tmp_path / "tf1"
    assert main(["convert", "--checkpoint", minilm_dir, "--out", str(out), "--google-out", str(tf1)]) == 0
    _, reference = load_checkpoint(minilm_dir)
    x = {"input_word_ids": np.array([[101, 7592, 2088, 102]], "int32"), "input_mask": np.ones((1, 4), "int32"),
         "input_type_ids": np.zeros((1, 4), "int32")}
    want = np.asarray(reference(x)["sequence_output"])
    np.testing.assert_array_equal(keras.models.load_model(out)(x)["sequence_output"], want)
    np.testing.assert_array_equal(load_checkpoint(str(tf1))[1](x)["sequence_output"], want)
    assert (tf1 / "vocab.txt").read_bytes() == (Path(minilm_dir) / "vocab.txt").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["minilm.keras", "tf1"]  # no partial files left


def test_convert_errors_exit_2_with_the_reason(tmp_path, capsys):
    assert main(["convert", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "m.keras")]) == 2
    assert "bert_model.ckpt.index" in capsys.readouterr().err
    assert main(["convert", "--checkpoint", str(tmp_path)]) == 2
    assert "Nothing to write" in capsys.readouterr().err


def test_presets_lists_parameter_counts(capsys):
    assert main(["presets"]) == 0
    assert "109,482,240" in capsys.readouterr().out


def test_demo_never_overwrites_a_run(minilm_dir, tmp_path, capsys):
    (tmp_path / "old.txt").write_text("a previous run")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err and sorted(p.name for p in tmp_path.iterdir()) == ["old.txt"]


def test_embed_finds_the_paraphrase(minilm_dir, capsys):
    # all-MiniLM-L6-v2 is trained for this: each sentence's nearest neighbour is its paraphrase.
    assert main(["embed", "The cat sits outside.", "A man is playing guitar.", "A kitten is sitting outdoors.",
                 "Someone strums a guitar on stage."]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "->" in line]
    assert "The cat sits outside." in lines[0] and "A kitten is sitting outdoors." in lines[0].split("->")[1]
    assert "Someone strums a guitar" in lines[1].split("->")[1]
