"""tokenizer.json, what transformers 5 saves instead of vocab.txt: read (vocabulary and casing) and written, with
ids equal to HF tokenizers' (`Tokenizer.from_file`, the reference) on a slice of every shared corpus, uncased and
cased; a transformers-5 folder (the bundled MiniLM without vocab.txt) loads with vocab.txt's tokens, casing and
ids; files BertPreprocessor cannot reproduce, and folders without a vocabulary, are refused with named errors."""

import json
import os
import shutil

import pytest
import tensorflow as tf
import tokenizers

from bert_keras import BertPreprocessor
from bert_keras.loading import load_backbone
from bert_keras.preprocessing.tokenizer_json import read_tokenizer_json, write_tokenizer_config, write_tokenizer_json
from bert_keras.preprocessing.folder_vocab import MissingVocabularyError, folder_vocabulary
from bert_keras.preprocessing.vocab import load_vocab, vocab_is_cased
from bert_keras.preprocessing.wordpiece import WordpieceTokenizer
from conftest import shared_data_dir
from corpora import corpora
from test_wordpiece import TRAPS

PER_CORPUS = 400          # texts from each shared corpus (10 corpora: 4,000 texts, about a second)


@pytest.fixture(scope="module")
def transformers5_folder(minilm_dir, tmp_path_factory):
    """The bundled all-MiniLM-L6-v2 as transformers 5's save_pretrained leaves a folder: no vocab.txt."""
    folder = tmp_path_factory.mktemp("minilm_transformers5")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(minilm_dir, name), folder / name)
    return str(folder)


@pytest.fixture(scope="module")
def cased_tokens(minilm_vocab):
    """A cased vocabulary of the same size: every other alphabetic MiniLM token capitalised (the shared data
    holds no cased BERT vocabulary)."""
    tokens = load_vocab(minilm_vocab)
    taken, cased = set(tokens), []
    for i, t in enumerate(tokens):
        upper = t.capitalize()
        cased.append(upper if t.isalpha() and i % 2 and upper not in taken else t)
        taken.add(cased[-1])
    assert vocab_is_cased(cased)
    return cased


@pytest.fixture(scope="module")
def texts():
    """The traps of test_wordpiece, and the first PER_CORPUS texts of each shared corpus (when on this machine)."""
    data = shared_data_dir()
    pools = corpora(data).values() if data is not None else []
    return TRAPS + [t for pool in pools for t in pool[:PER_CORPUS]]


def _mismatches(tokens, lower_case, reference, texts, batch=2048):
    """Texts whose WordPiece ids (BertPreprocessor's tokenizer) differ from the reference tokenizer's."""
    ours = WordpieceTokenizer(tokens, lower_case)
    bad = []
    for i in range(0, len(texts), batch):
        chunk = texts[i:i + batch]
        ids = ours.tokenize(tf.constant(chunk)).to_list()
        for text, mine, theirs in zip(chunk, ids, reference.encode_batch(chunk, add_special_tokens=False)):
            if mine != theirs.ids:
                bad.append(text)
    return bad


def test_read_gives_the_vocab_txt_tokens_and_the_casing(minilm_dir, minilm_vocab):
    tokens, lower_case = read_tokenizer_json(os.path.join(minilm_dir, "tokenizer.json"))
    assert tokens == load_vocab(minilm_vocab) and lower_case is True


@pytest.mark.parametrize("kind", ["minilm", "written_uncased", "written_cased"])
def test_ids_equal_hf_tokenizers_on_the_shared_corpora(kind, minilm_dir, minilm_vocab, cased_tokens, texts, tmp_path):
    """"minilm": the tokenizer.json transformers wrote, read by us; "written_*": ours, loaded by tokenizers."""
    path = os.path.join(minilm_dir, "tokenizer.json")
    if kind != "minilm":
        tokens, lower_case = (load_vocab(minilm_vocab), True) if kind == "written_uncased" else (cased_tokens, False)
        path = write_tokenizer_json(tokens, lower_case, str(tmp_path / "tokenizer.json"))
        assert read_tokenizer_json(path) == (tokens, lower_case)
        # tokenizers' own BERT builder gives the same pipeline as the file we wrote
        built = tokenizers.BertWordPieceTokenizer({t: i for i, t in enumerate(tokens)}, lowercase=lower_case)
        assert _mismatches(tokens, lower_case, built, texts[:500]) == []
    tokens, lower_case = read_tokenizer_json(path)
    reference = tokenizers.Tokenizer.from_file(path)
    reference.no_truncation()
    reference.no_padding()
    bad = _mismatches(tokens, lower_case, reference, texts)
    assert bad == [], f"{len(bad)} of {len(texts)} texts differ, e.g. {bad[:3]!r}"


def test_written_file_packs_single_texts_and_pairs_as_bert_preprocessor(cased_tokens, tmp_path):
    """The post-processor we write ([CLS] A [SEP] / [CLS] A [SEP] B:1 [SEP]:1) is BertPreprocessor's packing."""
    path = write_tokenizer_json(cased_tokens, False, str(tmp_path / "tokenizer.json"))
    reference = tokenizers.Tokenizer.from_file(path)
    first = ["The Cat sat.", "Ünïcödé text, “quoted”.", "東京 is big", "x"]
    second = ["On the Mat!", "a", "", "Naïve café"]
    pre = BertPreprocessor(cased_tokens, lower_case=False, seq_length=32)
    single, pair = pre(first), pre((first, second))
    for row, (a, b) in enumerate(zip(first, second)):
        for got, enc in ((single, reference.encode(a)), (pair, reference.encode(a, b))):
            n = len(enc.ids)
            assert got["input_word_ids"][row].numpy().tolist()[:n] == enc.ids
            assert got["input_type_ids"][row].numpy().tolist()[:n] == enc.type_ids
            assert int(got["input_mask"][row].numpy().sum()) == n


def test_transformers5_folder_loads_with_the_vocab_txt_tokens_casing_and_ids(transformers5_folder, minilm_vocab,
                                                                            texts):
    vocab, lower_case = folder_vocabulary(transformers5_folder)
    assert vocab == load_vocab(minilm_vocab) and lower_case is True
    encoder, pre = load_backbone(transformers5_folder, seq_length=64)
    with_vocab_txt = BertPreprocessor(minilm_vocab, seq_length=64)
    assert pre.vocab == with_vocab_txt.vocab and pre.lower_case is with_vocab_txt.lower_case is True
    sample = texts[:1000]
    for key, value in pre(sample).items():
        assert value.numpy().tolist() == with_vocab_txt(sample)[key].numpy().tolist(), key
    assert encoder.config.hidden_size == 384


def test_both_files_take_tokenizer_json_casing_and_refuse_a_disagreement(minilm_dir, cased_tokens, tmp_path):
    folder = tmp_path / "both"
    folder.mkdir()
    shutil.copy(os.path.join(minilm_dir, "vocab.txt"), folder / "vocab.txt")
    shutil.copy(os.path.join(minilm_dir, "tokenizer.json"), folder / "tokenizer.json")
    assert folder_vocabulary(str(folder)) == (str(folder / "vocab.txt"), True)
    write_tokenizer_json(cased_tokens, False, str(folder / "tokenizer.json"))
    with pytest.raises(ValueError, match="vocab.txt .* and tokenizer.json .* disagree from id 1037"):
        folder_vocabulary(str(folder))
    os.remove(folder / "tokenizer.json")
    assert folder_vocabulary(str(folder)) == (str(folder / "vocab.txt"), None)     # casing from the tokens


def _edited(minilm_dir, tmp_path, edit):
    """The MiniLM tokenizer.json with `edit(spec)` applied, written to tmp_path."""
    with open(os.path.join(minilm_dir, "tokenizer.json"), encoding="utf-8") as f:
        spec = json.load(f)
    edit(spec)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def test_unreproducible_tokenizers_are_refused_with_the_reason(minilm_dir, tmp_path):
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    bpe.save(str(tmp_path / "bpe.json"))
    with pytest.raises(ValueError, match="is a BPE tokenizer: only BERT WordPiece tokenizers are supported"):
        read_tokenizer_json(str(tmp_path / "bpe.json"))
    unigram = tokenizers.Tokenizer(tokenizers.models.Unigram([("<unk>", 0.0), ("a", -1.0)], 0))
    unigram.save(str(tmp_path / "unigram.json"))
    with pytest.raises(ValueError, match="is a Unigram tokenizer"):
        read_tokenizer_json(str(tmp_path / "unigram.json"))
    with pytest.raises(FileNotFoundError, match="missing.json not found"):
        read_tokenizer_json(str(tmp_path / "missing.json"))
    (tmp_path / "garbage.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a JSON tokenizer file"):
        read_tokenizer_json(str(tmp_path / "garbage.json"))
    cases = [  # (edit, the error names)
        (lambda s: s["normalizer"].update(strip_accents=False), "lower-cases but does not strip accents"),
        (lambda s: s["normalizer"].update(lowercase=False, strip_accents=True), "strips accents but does not "
                                                                                  "lower-case"),
        (lambda s: s["normalizer"].update(handle_chinese_chars=False), "handle_chinese_chars"),
        (lambda s: s.update(normalizer={"type": "NFC"}), "not BertNormalizer"),
        (lambda s: s.update(pre_tokenizer={"type": "Whitespace"}), "Whitespace, not BertPreTokenizer"),
        (lambda s: s["model"].update(continuing_subword_prefix="@@"), "continuing_subword_prefix is '@@'"),
        (lambda s: s["model"].update(unk_token="<unk>"), "unknown token is '<unk>'"),
        (lambda s: s["model"].update(max_input_chars_per_word=200), "max_input_chars_per_word is 200"),
        (lambda s: s["model"]["vocab"].update({"[PAD]": 40000}), "ids are not 0..30521 without gaps"),
        (lambda s: s["added_tokens"].append({"id": 30522, "content": "<new>", "special": False}),
         "adds tokens outside its WordPiece vocabulary"),
    ]
    for edit, message in cases:
        with pytest.raises(ValueError, match=message):
            read_tokenizer_json(_edited(minilm_dir, tmp_path, edit))
    # casings BertPreprocessor reproduces: strip_accents null follows lowercase; cased; a Sequence with Lowercase
    assert read_tokenizer_json(_edited(minilm_dir, tmp_path, lambda s: s["normalizer"].update(
        lowercase=False)))[1] is False
    assert read_tokenizer_json(_edited(minilm_dir, tmp_path, lambda s: s.update(normalizer={
        "type": "Sequence", "normalizers": [{**s["normalizer"], "lowercase": False, "strip_accents": True},
                                            {"type": "Lowercase"}]})))[1] is True


def test_a_folder_without_a_vocabulary_names_vocab_in_python_and_the_flag_in_the_cli(transformers5_folder,
                                                                                   tmp_path, capsys):
    from bert_keras_cli.main import main
    folder = tmp_path / "no_vocabulary"
    folder.mkdir()
    shutil.copy(os.path.join(transformers5_folder, "config.json"), folder / "config.json")
    with pytest.raises(MissingVocabularyError, match="neither vocab.txt nor tokenizer.json; pass vocab=") as e:
        load_backbone(str(folder))
    assert "--" not in str(e.value)
    with pytest.raises(FileNotFoundError, match="no vocabulary for bert_tiny: pass vocab="):
        load_backbone("bert_tiny")
    assert main(["fill-mask", "--model", str(folder), "The capital of France is [MASK]."]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "neither vocab.txt nor tokenizer.json; pass --vocab vocab.txt" in err[0], err


def test_tokenizer_config_names_bert_tokenizer_and_the_casing(tmp_path):
    config = json.loads(open(write_tokenizer_config(False, str(tmp_path / "c.json"), 128)).read())
    assert config["tokenizer_class"] == "BertTokenizer" and config["do_lower_case"] is False
    assert config["model_max_length"] == 128
