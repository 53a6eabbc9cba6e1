"""A Hugging Face folder as transformers 5 saves it (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json; no vocab.txt) works wherever a model folder is taken, with the same answers as with
`--vocab vocab.txt`: `fill-mask` and `load_masked_lm`, `features`, `export-hub`, `finetune --model`, `convert`
(its --google-out and --hf-out get a vocab.txt, --hf-out a tokenizer.json too) and `zoo get`. The model is a
bert_tiny-sized BertForMaskedLM (random weights, a spread output bias so the top tokens are well apart) with the
MiniLM tokenizer files transformers wrote; the CLI runs in-process (export-hub and finetune: integration tier).
A folder that transformers itself saves: test_fill_mask_torch.py (torch tier)."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.checkpoints.huggingface import write_huggingface
from bert_keras.checkpoints.names import encoder_weights
from bert_keras.preprocessing.tokenizer_json import read_tokenizer_json
from bert_keras.preprocessing.vocab import load_vocab
from bert_keras.tasks import BertMaskedLM, load_masked_lm
from bert_keras_cli.main import main

TEXTS = ["The capital of France is [MASK].", "A [MASK] sat on the [MASK], purring.", "Ünïcödé [MASK] text."]


@pytest.fixture(scope="module")
def folder(minilm_dir, minilm_vocab, tmp_path_factory):
    """A BertForMaskedLM folder without vocab.txt: our weights, transformers' MiniLM tokenizer files."""
    keras.utils.set_random_seed(5)
    model = BertMaskedLM(BertEncoder(PRESETS["bert_tiny"]), BertPreprocessor(minilm_vocab))
    model.mlm_head.output_bias.assign(np.random.default_rng(0).normal(0, 2, 30522))
    heads = {k: np.asarray(v) for k, v in model.mlm_head.checkpoint_variables().items()}
    out = str(tmp_path_factory.mktemp("transformers5") / "mlm")
    write_huggingface({**encoder_weights(model.encoder), **heads}, out, model.encoder.config)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(minilm_dir, name), os.path.join(out, name))
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    return out


def test_fill_mask_answers_as_with_vocab(folder, minilm_vocab, capsys):
    answers = []
    for extra in ([], ["--vocab", minilm_vocab]):
        assert main(["fill-mask", "--model", folder, "--json", *extra, *TEXTS]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0] == answers[1] and len(answers[0]) == 3
    assert len(answers[0][1]) == 2 and all(len(mask) == 5 for mask in answers[0][1])


def test_features_are_those_with_vocab(folder, minilm_vocab, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("The unbelievably naïve cat.\n東京 is BIG\n", encoding="utf-8")
    written = []
    for name, extra in (("folder", []), ("vocab", ["--vocab", minilm_vocab])):
        out = tmp_path / f"{name}.npz"
        assert main(["features", "--model", folder, *extra, str(texts), "--out", str(out)]) == 0, \
            capsys.readouterr().err
        written.append(dict(np.load(out)))
    assert sorted(written[0]) == sorted(written[1])
    for key, value in written[0].items():
        np.testing.assert_array_equal(value, written[1][key], err_msg=key)


def test_convert_writes_the_vocabulary_beside_both_outputs(folder, minilm_vocab, tmp_path, capsys):
    google, hf = tmp_path / "google", tmp_path / "hf"
    assert main(["convert", "--checkpoint", folder, "--google-out", str(google), "--hf-out", str(hf)]) == 0, \
        capsys.readouterr().err
    tokens = load_vocab(minilm_vocab)
    assert load_vocab(str(google / "vocab.txt")) == tokens and load_vocab(str(hf / "vocab.txt")) == tokens
    assert read_tokenizer_json(str(hf / "tokenizer.json")) == (tokens, True)
    assert json.loads((hf / "tokenizer_config.json").read_text())["do_lower_case"] is True
    theirs = load_masked_lm(folder).fill_mask(TEXTS)                    # load_masked_lm, from both sides
    assert load_masked_lm(str(hf)).fill_mask(TEXTS) == theirs


def test_zoo_get_caches_it_with_a_vocab_txt(folder, minilm_vocab, tmp_path, monkeypatch):
    from bert_keras.zoo import from_preset
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "zoo"))
    _, pre = from_preset(folder, progress=False)
    assert pre.vocab == load_vocab(minilm_vocab) and pre.lower_case is True


@pytest.mark.integration
def test_export_hub_preprocessor_gives_the_vocab_txt_ids(folder, minilm_vocab, tmp_path, capsys):
    import tensorflow as tf
    out = tmp_path / "hub"
    assert main(["export-hub", "--model", folder, "--out", str(out), "--seq-length", "32"]) == 0, \
        capsys.readouterr().err
    served = tf.saved_model.load(str(out / "preprocessor"))(tf.constant(TEXTS))
    want = BertPreprocessor(minilm_vocab, seq_length=32)(TEXTS)
    for key, value in want.items():
        assert served[key].numpy().tolist() == value.numpy().tolist(), key


@pytest.mark.integration
def test_finetune_model_trains_with_its_vocabulary(folder, minilm_vocab, tmp_path, capsys):
    import bert_keras
    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\tlabel\n" + "a great film .\t1\nDull and LONG .\t0\n" * 8, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["finetune", "--quiet", "--task", "sst-2", "--model", folder, "--train", str(tsv), "--epochs", "1",
                 "--batch-size", "8", "--max-seq-length", "32", "--out", str(out)]) == 0, capsys.readouterr().err
    model = bert_keras.load_task_model(str(out))
    assert model.preprocessor.vocab == load_vocab(minilm_vocab) and model.preprocessor.lower_case is True
