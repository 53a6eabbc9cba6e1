"""The TF Hub preprocessor API of `export-hub`'s preprocessor SavedModel, against what TF Hub's
`bert_en_uncased_preprocess/3` computes and HF tokenizers:

  tokenize     [B, (words), (pieces)]: the words equal HF tokenizers' word_ids() groups and TF.Text's
               BertTokenizer (TF Hub's tokenizer) output; the pieces are the project's tokenizer's ids.
  bert_pack_inputs  any seq_length (a scalar argument of the saved functions, as in the Model Garden's
               export_tfhub_lib.BertPackInputsSavedModelWrapper), 1-3 segments of either rank; equal to the Model
               Garden's BertPackInputs.bert_pack_inputs steps (TF.Text RoundRobinTrimmer, combine_segments,
               pad_model_inputs), which TF Hub's SavedModel runs.
Loaded with tf.saved_model.load (what hub.load does); tests/savedmodels/test_hub_tutorials.py runs TF Hub's
tutorials on it with tensorflow_hub and tf_keras."""

import csv
import itertools
import json
import os
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from conftest import REPO
from savedmodels.hub import export_hub_style
from savedmodels.ops import saved_model_op_types, unsupported_ops
from session_path import run_signatures

SST2 = REPO / "bert_keras" / "data" / "samples" / "sst2_train.tsv"
# Words the basic tokenizer splits or keeps whole: punctuation, CJK, accents, "##" typed in the text, unknown
# characters, a word of more than 100 characters ([UNK]), empty and blank rows.
TRAPS = [
    "Hello, World! it's $5+3=8 ^_^ `x` |y| ~z~ a@b.c #tag {q} [r] \\s ##ing",
    "Café Müller — 東京 İstanbul unaffable tokenization's",
    "emoji 🙂👍🏽 zwj 👨‍👩‍👧 한국어 텍스트입니다 （括弧）「引用」、。",
    "a" * 101 + " " + "é" * 60 + " ok", "", "   ", "[SEP] [CLS] [MASK]", "x" * 30 + "ing " * 3,
]


def sst2_sentences(n: int | None = None) -> list[str]:
    with open(SST2, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    return [r[0] for r in rows[:n]]


@pytest.fixture(scope="module")
def hub_export(tmp_path_factory, minilm_vocab):
    """export-hub of a random bert_tiny with the MiniLM vocabulary (seq_length 128): paths, loaded preprocessor."""
    keras.utils.set_random_seed(3)
    out = tmp_path_factory.mktemp("hub") / "export"
    paths = export_hub_style(BertEncoder(PRESETS["bert_tiny"]), BertPreprocessor(minilm_vocab), str(out), 128)
    return paths, tf.saved_model.load(paths["preprocessor"])


def tf_hub_pack(segments, seq_length: int, cls_id=101, sep_id=102, pad_id=0) -> dict:
    """TF Hub's packing: the Model Garden's BertPackInputs.bert_pack_inputs (official/nlp/modeling/layers/
    text_layers.py, v2.20.0), which the preprocess SavedModels run: flatten words, RoundRobinTrimmer to
    seq_length - (segments + 1), combine_segments, pad_model_inputs."""
    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    trimmed = tf_text.RoundRobinTrimmer(seq_length - len(segments) - 1).trim(segments)
    ids, types = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
    word_ids, _ = tf_text.pad_model_inputs(ids, seq_length, pad_value=pad_id)
    type_ids, mask = tf_text.pad_model_inputs(types, seq_length, pad_value=0)
    return {"input_word_ids": word_ids.numpy(), "input_mask": mask.numpy(), "input_type_ids": type_ids.numpy()}


def tf_hub_tokenize(vocab_path: str, texts):
    """TF Hub's tokenize: TF.Text's BertTokenizer (lower_case), int32 [B, (words), (pieces)]."""
    return tf_text.BertTokenizer(vocab_path, lower_case=True, token_out_type=tf.int32).tokenize(tf.constant(texts))


def hf_word_groups(encoding) -> list[list[int]]:
    groups, last = [], object()
    for word, token in zip(encoding.word_ids, encoding.ids):
        if word != last:
            groups.append([])
            last = word
        groups[-1].append(token)
    return groups


def test_tokenize_gives_words_of_pieces_as_hf_word_ids_and_tf_text(hub_export, hf_tokenizer, minilm_vocab):
    _, pre = hub_export
    texts = TRAPS + sst2_sentences()
    tokens = pre.tokenize(tf.constant(texts))
    assert tokens.shape.as_list() == [len(texts), None, None] and tokens.ragged_rank == 2
    assert tokens.dtype == tf.int32
    # The pieces are exactly today's ids (BertPreprocessor.tokenize, HF's ids).
    flat = BertPreprocessor(minilm_vocab).tokenize(tf.constant(texts))
    assert tokens.merge_dims(1, 2).to_list() == flat.to_list()
    encodings = hf_tokenizer.encode_batch(texts, add_special_tokens=False)
    ours = tokens.to_list()
    groups = [hf_word_groups(e) for e in encodings]
    differ = [t for t, o, g, e in zip(texts, ours, groups, encodings)
              if sum(o, []) == e.ids and o != g]
    # HF reads "[SEP]" typed in the text as the special token; we keep it text (wordpiece.py).
    assert [t for t, o, e in zip(texts, ours, encodings) if sum(o, []) != e.ids] == ["[SEP] [CLS] [MASK]"]
    assert differ == [] and sum(len(g) for g in groups) > 9000
    # TF Hub's own tokenizer (TF.Text BertTokenizer) gives the same nesting, on real text exactly.
    reference = tf_hub_tokenize(minilm_vocab, texts[len(TRAPS):]).to_list()
    assert ours[len(TRAPS):] == reference


def _segments(pre, texts_per_segment, ranks):
    out = []
    for texts, rank in zip(texts_per_segment, ranks):
        tokens = pre.tokenize(tf.constant(texts))
        out.append(tokens if rank == 2 else tokens.merge_dims(1, 2))
    return out


@pytest.mark.parametrize("k", [1, 2, 3])
def test_bert_pack_inputs_any_seq_length_equals_tf_hubs_packing(hub_export, k):
    _, pre = hub_export
    sentences = sst2_sentences(60)
    long = " ".join(sentences[:12])                          # ~150 pieces: cut at every length below
    texts = [sentences[i::3][:16] + [long, "", long, "a b"] for i in range(3)]
    longest = {}
    for seq_length in (None, 8, 20, 32, 64, 300):
        for ranks in itertools.product((1, 2), repeat=k):
            segments = _segments(pre, texts[:k], ranks)
            got = (pre.bert_pack_inputs(segments) if seq_length is None
                   else pre.bert_pack_inputs(segments, seq_length=seq_length))
            want = tf_hub_pack(segments, seq_length or 128)
            for name in want:
                assert got[name].dtype == tf.int32
                np.testing.assert_array_equal(got[name].numpy(), want[name], err_msg=f"{name} {seq_length} {ranks}")
            longest[seq_length or 128] = int(got["input_mask"].numpy().sum(axis=1).max())
    assert all(longest[n] == n for n in (8, 20, 32, 64, 128))  # rows were cut to every length


def test_pairs_equal_hf_tokenizers_where_nothing_is_cut(hub_export, hf_tokenizer):
    _, pre = hub_export
    sentences = sst2_sentences(400)
    a, b = sentences[0::2], sentences[1::2]
    got = pre.bert_pack_inputs([pre.tokenize(tf.constant(a)), pre.tokenize(tf.constant(b))], tf.constant(64))
    got = {k: v.numpy() for k, v in got.items()}
    hf_tokenizer.enable_padding(length=64)
    try:
        encodings = hf_tokenizer.encode_batch(list(zip(a, b)))
    finally:
        hf_tokenizer.no_padding()
    compared = 0
    for i, e in enumerate(encodings):
        if len(e.ids) > 64:                                    # HF cut nothing: padding only
            continue
        compared += 1
        assert got["input_word_ids"][i].tolist() == e.ids
        assert got["input_type_ids"][i].tolist() == e.type_ids
        assert got["input_mask"][i].tolist() == e.attention_mask
    assert compared > 150


def test_special_tokens_shapes_and_errors(hub_export):
    _, pre = hub_export
    special = {k: v.numpy().item() for k, v in pre.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": 30522, "padding_id": 0, "start_of_sequence_id": 101, "end_of_segment_id": 102,
                       "mask_id": 103}

    def shapes(fn, *args, **kwargs):
        out = tf.function(lambda *a: fn(*a, **kwargs)).get_concrete_function(*args).structured_outputs
        return tf.nest.map_structure(lambda t: t.shape.as_list(), out)

    # As the Model Garden's export_tfhub_lib_test.test_shapes expects of TF Hub's preprocessor.
    for batch in (7, None):
        assert shapes(pre.tokenize, tf.TensorSpec([batch], tf.string)) == [batch, None, None]
        assert shapes(pre.bert_pack_inputs, [tf.RaggedTensorSpec([batch, None, None], tf.int32)] * 2,
                      seq_length=256) == {k: [batch, 256] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        assert shapes(pre, tf.TensorSpec([batch], tf.string)) == {
            k: [batch, 128] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    tokens = pre.tokenize(tf.constant(["a b", "c"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="shorter than the 3 special tokens"):
        pre.bert_pack_inputs([tokens, tokens], seq_length=2)
    assert pre.bert_pack_inputs([tokens] * 2, seq_length=3)["input_word_ids"].numpy().tolist() == [[101, 102, 102]] * 2


def test_reexport_session_path_and_op_check(hub_export, tmp_path):
    paths, pre = hub_export
    texts = ["A charming, often affecting journey.", "Ünïcödé — 東京"]
    # Saved again from the loaded object (what a Keras model holding it does on model.save), then loaded alone.
    tf.saved_model.save(pre, str(tmp_path / "again"))
    again = tf.saved_model.load(str(tmp_path / "again"))
    assert again.tokenize(tf.constant(texts)).to_list() == pre.tokenize(tf.constant(texts)).to_list()
    segments = [again.tokenize(tf.constant(texts))] * 3
    np.testing.assert_array_equal(again.bert_pack_inputs(segments, seq_length=16)["input_type_ids"].numpy(),
                                  pre.bert_pack_inputs(segments, seq_length=16)["input_type_ids"].numpy())
    # TF Serving's path: loader.load + session.run of serving_default, in a process without the project.
    served, encoded = run_signatures([
        {"path": paths["preprocessor"], "signature": "serving_default", "inputs": {"text": texts}},
        {"path": paths["encoder"], "signature": "serving_default",
         "inputs": {k: v.numpy().tolist() for k, v in pre(tf.constant(texts)).items()}}])
    for name, value in pre(tf.constant(texts)).items():
        assert served[name] == value.numpy().tolist()
    assert np.array(encoded["pooled_output"]).shape == (2, 128)
    for path in paths.values():
        assert unsupported_ops(saved_model_op_types(path)) == set()


TF212_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
pre = tf.saved_model.load(sys.argv[1])
tokens = pre.tokenize(tf.constant(json.loads(sys.argv[2])))
packed = pre.bert_pack_inputs([tokens, tokens.merge_dims(1, 2), tokens], seq_length=16)
print(json.dumps({"tokens": tokens.to_list(), "packed": {k: v.numpy().tolist() for k, v in packed.items()},
                  "special": {k: int(v) for k, v in pre.tokenize.get_special_tokens_dict().items()}}))
"""


@pytest.mark.slow
def test_hub_api_and_session_path_under_the_tensorflow_stock_tf_serving_2_12_links(hub_export):
    """TF 2.12.0 + TF.Text 2.12.1 (BERT_KERAS_TF212_PYTHON, as test_export.py): the TF Hub API through
    tf.saved_model.load, and both serving_default signatures on the session path."""
    python = os.environ.get("BERT_KERAS_TF212_PYTHON")
    if not python:
        pytest.skip("set BERT_KERAS_TF212_PYTHON to a python with tensorflow 2.12.0 and tensorflow-text 2.12.1")
    paths, pre = hub_export
    texts = ["A charming, often affecting journey.", "Ünïcödé — 東京", ""]
    result = subprocess.run([python, "-c", TF212_SCRIPT, paths["preprocessor"], json.dumps(texts)],
                            capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    tokens = pre.tokenize(tf.constant(texts))
    assert got["tokens"] == tokens.to_list()
    packed = pre.bert_pack_inputs([tokens, tokens.merge_dims(1, 2), tokens], seq_length=16)
    assert got["packed"] == {k: v.numpy().tolist() for k, v in packed.items()}
    assert got["special"]["mask_id"] == 103
    ids = {k: v.numpy().tolist() for k, v in pre(tf.constant(texts)).items()}
    served, encoded = run_signatures([
        {"path": paths["preprocessor"], "signature": "serving_default", "inputs": {"text": texts}},
        {"path": paths["encoder"], "signature": "serving_default", "inputs": ids}], python=python)
    assert {k: served[k] for k in ids} == ids
    assert np.array(encoded["pooled_output"]).shape == (3, 128)
