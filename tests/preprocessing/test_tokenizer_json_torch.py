"""tokenizer.json both ways with transformers 5: the folder we write (tokenizer.json + tokenizer_config.json, no
vocab.txt) loads in AutoTokenizer as a BertTokenizer with our casing and our ids, uncased and cased; the files
transformers' BertTokenizer saves read back as its vocabulary and casing, and a casing BertPreprocessor cannot
reproduce (lower-casing that keeps accents) is refused."""

import os

import pytest
import tensorflow as tf

from bert_keras.preprocessing.tokenizer_json import read_tokenizer_json, write_tokenizer_config, write_tokenizer_json
from bert_keras.preprocessing.vocab import load_vocab
from bert_keras.preprocessing.wordpiece import WordpieceTokenizer
from test_tokenizer_json import PER_CORPUS, cased_tokens, texts  # noqa: F401  (fixtures)

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("lower_case", [True, False])
def test_auto_tokenizer_loads_our_files_with_our_ids(lower_case, minilm_vocab, cased_tokens, texts, tmp_path):
    from transformers import AutoTokenizer
    tokens = load_vocab(minilm_vocab) if lower_case else cased_tokens
    write_tokenizer_json(tokens, lower_case, str(tmp_path / "tokenizer.json"))
    write_tokenizer_config(lower_case, str(tmp_path / "tokenizer_config.json"), 512)
    theirs = AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(theirs).__name__ in ("BertTokenizer", "BertTokenizerFast") and theirs.do_lower_case is lower_case
    assert theirs.model_max_length == 512 and theirs.mask_token_id == tokens.index("[MASK]")
    sample = texts[:PER_CORPUS * 3]
    ours = WordpieceTokenizer(tokens, lower_case).tokenize(tf.constant(sample)).to_list()
    got = theirs(sample, add_special_tokens=False)["input_ids"]
    bad = [t for t, a, b in zip(sample, ours, got) if a != b]
    assert bad == [], f"{len(bad)} of {len(sample)} differ, e.g. {bad[:3]!r}"
    pair = theirs("The Cat sat.", "On the Mat!")
    assert pair["token_type_ids"].count(1) == len(theirs("On the Mat!", add_special_tokens=False)["input_ids"]) + 1


@pytest.mark.parametrize("lower_case", [True, False])
def test_the_files_transformers_saves_read_back(lower_case, minilm_vocab, cased_tokens, tmp_path):
    from transformers import BertTokenizer
    tokens = load_vocab(minilm_vocab) if lower_case else cased_tokens
    BertTokenizer(vocab={t: i for i, t in enumerate(tokens)}, do_lower_case=lower_case).save_pretrained(str(tmp_path))
    assert "vocab.txt" not in os.listdir(tmp_path)
    assert read_tokenizer_json(str(tmp_path / "tokenizer.json")) == (tokens, lower_case)


def test_lower_casing_that_keeps_accents_is_refused(minilm_vocab, tmp_path):
    from transformers import BertTokenizer
    BertTokenizer(vocab={t: i for i, t in enumerate(load_vocab(minilm_vocab))}, do_lower_case=True,
                  strip_accents=False).save_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="lower-cases but does not strip accents"):
        read_tokenizer_json(str(tmp_path / "tokenizer.json"))
