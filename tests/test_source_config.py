"""A model source's positions from its configuration alone (source_config.py), and what load_backbone does with
them: a length over them is refused before any weight loads, the default length is the model's when it has fewer
than 512; a .keras file that is cut short, or holds no BERT encoder, is named (model_files.py)."""

import json
import shutil
import zipfile

import keras
import pytest

from bert_keras import BertConfig, BertEncoder, save_google_checkpoint
from bert_keras.loading import load_backbone
from bert_keras.model_files import load_model_file
from bert_keras.source_config import check_max_seq_length, max_positions

SHORT = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=32, max_position_embeddings=64)


@pytest.fixture(scope="module")
def sources(tmp_path_factory, minilm_dir, minilm_vocab):
    """{kind: source} of a 64-position model in each form, plus MiniLM's Hugging Face folder (512)."""
    root = tmp_path_factory.mktemp("sources")
    encoder = BertEncoder(SHORT)
    encoder.save(root / "short.keras")
    save_google_checkpoint(encoder, str(root / "checkpoint"), vocab_file=minilm_vocab)
    (root / "run").mkdir()                                          # a `finetune --out` folder
    shutil.copyfile(root / "short.keras", root / "run" / "model.keras")
    return {"keras": str(root / "short.keras"), "checkpoint": str(root / "checkpoint"),
            "prefix": str(root / "checkpoint" / "bert_model.ckpt"), "run": str(root / "run"),
            "huggingface": minilm_dir, "root": root}


@pytest.mark.parametrize("kind", ["keras", "checkpoint", "prefix", "run"])
def test_the_positions_come_from_the_configuration(sources, kind):
    assert max_positions(sources[kind]) == 64
    with pytest.raises(ValueError, match=r"--max-seq-length 65 is over the 64 positions of .*: give "
                                         r"--max-seq-length 64 or less"):
        check_max_seq_length(sources[kind], 65)
    check_max_seq_length(sources[kind], 64)


def test_presets_hugging_face_folders_and_unknown_sources(sources):
    assert max_positions("bert_tiny") == 512 and max_positions(sources["huggingface"]) == 512
    assert max_positions("no_such_model") is None                   # a zoo name never fetched: the loader decides
    with pytest.raises(ValueError, match="leaves no room for a word"):
        check_max_seq_length("bert_tiny", 2)


def test_load_backbone_refuses_before_loading_and_defaults_to_the_models_positions(sources, minilm_vocab):
    # The checkpoint's data file is gone: had the weights been read first, the error would name it.
    partial = sources["root"] / "partial"
    shutil.copytree(sources["checkpoint"], partial)
    [data] = partial.glob("bert_model.ckpt.data-*")
    data.unlink()
    with pytest.raises(ValueError, match="max_seq_length 128 is over the 64 positions"):
        load_backbone(str(partial), max_seq_length=128)
    _, preprocessor = load_backbone(sources["keras"], vocab=minilm_vocab)
    assert preprocessor.max_seq_length == 64                        # not BertPreprocessor's 512
    _, preprocessor = load_backbone("bert_tiny", vocab=minilm_vocab)
    assert preprocessor.max_seq_length == 512


def test_a_keras_file_cut_short_or_not_bert_is_named(sources, minilm_vocab, tmp_path):
    data = open(sources["keras"], "rb").read()
    cut = tmp_path / "cut.keras"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.keras is not a whole \.keras file"):   # Keras: "File not found"
        load_model_file(str(cut))
    with pytest.raises(FileNotFoundError, match="no such model file"):
        load_model_file(str(tmp_path / "missing.keras"))
    other = tmp_path / "other.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(other)
    assert max_positions(str(other)) is None
    with pytest.raises(ValueError, match="holds a Sequential, not a BERT encoder"):
        load_backbone(str(other), vocab=minilm_vocab)
    config = json.loads(zipfile.ZipFile(sources["keras"]).read("config.json"))
    assert config["config"]["config"]["max_position_embeddings"] == 64   # what max_positions read
