"""A vocabulary and a model's word table meet in loading.load_backbone: a model with weights and a vocabulary of
another length is refused there, before any lookup runs (ids past the table were a TensorFlow gather error, or
rows learnt for other tokens); a preset (random weights) is built with the vocabulary's length instead."""

import pytest

from bert_keras import BertConfig, BertEncoder
from bert_keras.checkpoints.google import write_google_checkpoint
from bert_keras.checkpoints.names import encoder_weights
from bert_keras.config import PRESETS
from bert_keras.loading import load_backbone
from bert_keras_cli.main import main

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TINY = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=20)


def tokens(count):
    return SPECIALS + [f"w{i}" for i in range(count - len(SPECIALS))]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "model"
    return write_google_checkpoint(encoder_weights(BertEncoder(TINY)), str(folder), config=TINY,
                                   vocab_file=tokens(50))


def test_the_vocabulary_the_weights_were_trained_with_loads(checkpoint):
    encoder, preprocessor = load_backbone(checkpoint, vocab=tokens(50))
    assert (encoder.config.vocab_size, len(preprocessor.vocab)) == (50, 50)


@pytest.mark.parametrize("size", [49, 51, 30522])
def test_a_vocabulary_of_another_length_than_the_weights_is_refused(checkpoint, size):
    with pytest.raises(ValueError) as caught:
        load_backbone(checkpoint, vocab=tokens(size))
    message = str(caught.value)
    assert f"has vocab_size 50 but the vocabulary" in message and f"has {size} tokens" in message
    assert "give the vocabulary its weights were trained with (50 tokens" in message and "\n" not in message


def test_a_preset_is_built_with_the_vocabularys_length(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tokens(1981)) + "\n", encoding="utf-8")
    assert PRESETS["bert_tiny"].vocab_size == 30522
    encoder, preprocessor = load_backbone("bert_tiny", vocab=str(vocab), seq_length=8)
    assert encoder.config.vocab_size == 1981 == len(preprocessor.vocab)
    assert encoder.embeddings.word_embeddings.embeddings.shape[0] == 1981


def test_the_command_line_refuses_it_in_one_line(checkpoint, tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tokens(40)) + "\n", encoding="utf-8")
    out = tmp_path / "a.npz"
    assert main(["attention", "w1 w2", "--model", checkpoint, "--vocab", str(vocab), "--npz", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bert-keras attention: error: ")
    assert f"has vocab_size 50 but the vocabulary {vocab} has 40 tokens" in err[0]
    assert not out.exists()


def test_a_checkpoint_that_does_not_fit_its_config_is_one_line_with_a_count(tmp_path):
    wrong = BertConfig(**{**TINY.to_dict(), "hidden_size": 32})
    prefix = write_google_checkpoint(encoder_weights(BertEncoder(TINY)), str(tmp_path / "m"), config=wrong,
                                     vocab_file=tokens(50))
    with pytest.raises(ValueError) as caught:
        load_backbone(prefix)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("Checkpoint does not fit the config: shape of ")
    assert ": the google checkpoint " in message and " has (16,), the config needs (32,)" in message
    # 23 tensors in one layer's encoder; all but intermediate/dense/bias (32,) have a hidden-size axis: 22 differ
    assert len(encoder_weights(BertEncoder(TINY))) == 23 and "(and 21 more mismatches)" in message
    assert "check that bert_config.json" in message
