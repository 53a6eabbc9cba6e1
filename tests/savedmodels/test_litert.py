"""The LiteRT export (`bert-keras export --format litert`): raw text in one .tflite, run by ai_edge_litert.

References: HF tokenizers for the ids and byte offsets (the tokenizer .tflite alone, on the traps and fuzz of
test_wordpiece.py and, slow, every text of the shared corpora); the task model's own `serve` (what the
SavedModel's serving_default runs, tests/savedmodels/test_export.py holds the two equal) for every output, within
1e-4; SST-2 dev accuracy of fp16 and int8 against fp32 (slow). Needs the [litert] extra (skips without it).
"""

import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("ai_edge_litert")

from bert_keras.preprocessing import BertPreprocessor  # noqa: E402
from bert_keras.preprocessing.vocab import SPECIAL_TOKENS  # noqa: E402
from bert_keras.tasks import BertClassifier  # noqa: E402
from savedmodels.litert import (check_ops, convert, custom_ops, tokenizer_flatbuffer,  # noqa: E402
                                without_custom_op_notice)
from savedmodels.litert_runner import LiteRTModel  # noqa: E402
from savedmodels.litert_text import TFTEXT_OPS  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "preprocessing"))
from corpora import corpora  # noqa: E402
from test_wordpiece import _CHARS, TRAPS, _byte_offsets, _divergent  # noqa: E402

SENTENCES = ["a charming and often affecting journey .", "Ünïcödé — “quoted” text", "", "   \t  ",
             "x" * 120 + " Straße ﬁne \u200bzero\u200b", "caf\u00e9\ufffd \x00nul"]


class LiteRTTokenizer:
    """The export's tokenizer as a .tflite, on ai_edge_litert: text -> per text (ids, [(start, end)])."""

    def __init__(self, preprocessor):
        import tensorflow_text as tf_text
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
        self.flatbuffer = tokenizer_flatbuffer(preprocessor)
        interpreter = InterpreterWithCustomOps(model_content=self.flatbuffer,
                                               custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS)
        self.runner = interpreter.get_signature_runner()

    def __call__(self, texts):
        out = self.runner(text=np.array([t.encode("utf-8", "surrogatepass") for t in texts], object))
        splits = out["splits"]
        return [(out["ids"][a:b].tolist(), list(zip(out["starts"][a:b].tolist(), out["ends"][a:b].tolist())))
                for a, b in zip(splits[:-1], splits[1:])]


@pytest.fixture(scope="module")
def lite_tokenizer(minilm_vocab):
    return LiteRTTokenizer(BertPreprocessor(minilm_vocab))


def _mismatches(lite, hf_tokenizer, texts, batch=2048):
    bad = []
    for i in range(0, len(texts), batch):
        chunk = texts[i:i + batch]
        for text, (ids, offsets), enc in zip(chunk, lite(chunk), hf_tokenizer.encode_batch(chunk, add_special_tokens=False)):
            if ids != enc.ids or offsets != _byte_offsets(text, enc.offsets):
                bad.append(text)
    return bad


def test_tokenizer_has_only_tftext_kernels_beside_builtins(lite_tokenizer):
    assert set(custom_ops(lite_tokenizer.flatbuffer)) <= set(TFTEXT_OPS)


def test_traps_match_hf_tokenizers_ids_and_offsets(lite_tokenizer, hf_tokenizer):
    assert _mismatches(lite_tokenizer, hf_tokenizer, TRAPS) == []


def test_invalid_utf8_is_dropped_as_the_savedmodel_drops_it(lite_tokenizer, hf_tokenizer):
    raw = b"caf\xffe \xe4\xb8x \xed\xa0\x80y \xf0\x9f\x98"
    out = lite_tokenizer.runner(text=np.array([raw], object))
    assert out["ids"].tolist() == hf_tokenizer.encode(raw.decode("utf-8", errors="replace"),
                                                      add_special_tokens=False).ids


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(_CHARS, max_size=60), min_size=1, max_size=8))
def test_fuzz_arbitrary_unicode_matches_hf_tokenizers(lite_tokenizer, hf_tokenizer, texts):
    assume(not any(special in text for text in texts for special in SPECIAL_TOKENS))
    assume(not _divergent(texts))
    assert _mismatches(lite_tokenizer, hf_tokenizer, texts) == []


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.sampled_from("aeéßΩǅ한ﬁ"), min_size=90, max_size=110), min_size=1, max_size=4))
def test_fuzz_words_near_the_100_character_limit(lite_tokenizer, hf_tokenizer, words):
    texts = [" ".join(words), "".join(words), "-".join(words)]
    assert _mismatches(lite_tokenizer, hf_tokenizer, texts) == []


@pytest.mark.slow
def test_every_text_of_every_shared_corpus_matches_hf_tokenizers(lite_tokenizer, hf_tokenizer, shared_data):
    for name, texts in corpora(shared_data).items():
        bad = _mismatches(lite_tokenizer, hf_tokenizer, texts)
        assert bad == [], f"{name}: {len(bad)} of {len(texts)} differ, e.g. {bad[:3]!r}"


def test_a_graph_needing_flex_is_refused_with_the_op_named():
    def regex(text):
        return {"out": tf.strings.regex_replace(text, "a", "b")}
    function = tf.function(regex, input_signature=[tf.TensorSpec([None], tf.string)]).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
    converter.allow_custom_ops = True
    with pytest.raises(ValueError, match="StaticRegexReplace.*Flex"):
        check_ops(converter.convert())


NOTICE = ("2026-11-29 05:03:18.270451: W tensorflow/compiler/mlir/lite/flatbuffer_export.cc:4093] The following "
          "operation(s) need TFLite custom op implementation(s):\nCustom ops: {ops}\nDetails:\n\ttf.{op}(tensor<?x!"
          "tf_type.string>) -> (tensor<?x!tf_type.string>) : {{device = \"\"}}\nSee instructions: "
          "https://www.tensorflow.org/lite/guide/ops_custom\n")      # TensorFlow 2.20's, as an export printed it


def test_the_converters_notice_is_dropped_for_tftext_ops_only():
    ours = NOTICE.format(ops=", ".join(sorted(TFTEXT_OPS)), op=sorted(TFTEXT_OPS)[0])
    other = NOTICE.format(ops="FastBertNormalize, MyOp", op="MyOp")
    assert without_custom_op_notice(f"a line before\n{ours}a line after\n") == "a line before\na line after\n"
    assert without_custom_op_notice(other) == other


CONVERT_TWICE = """
import sys
import savedmodels.litert as litert
from bert_keras.preprocessing import BertPreprocessor
pre = BertPreprocessor(sys.argv[1])
litert.tokenizer_flatbuffer(pre)
print("-- unfiltered --", file=sys.stderr, flush=True)
litert._convert = lambda converter: converter.convert()
litert.tokenizer_flatbuffer(pre)
"""


@pytest.mark.integration                 # a process of its own, at another log level: ~10-25 s
def test_the_export_prints_no_custom_op_notice_where_tensorflow_prints_one(minilm_vocab):
    """In a process at TensorFlow's default level for a library user (TF_CPP_MIN_LOG_LEVEL 1: warnings print), the
    converter's notice for TF.Text's ops, written from C++, is gone from the export's stderr; the same conversion
    without the filter prints it."""
    from conftest import REPO
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}
    run = subprocess.run([sys.executable, "-c", CONVERT_TWICE, minilm_vocab], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    filtered, unfiltered = run.stderr.split("-- unfiltered --")
    assert "need TFLite custom op implementation(s)" in unfiltered, "TensorFlow no longer prints the notice"
    assert "custom op" not in filtered and "ops_custom" not in filtered, filtered


# ---- every task kind against its own serve --------------------------------------------------------------------

INPUTS = {
    "sst2": {"text": SENTENCES},
    "mrpc": {"text_a": SENTENCES, "text_b": SENTENCES[::-1]},
    "stsb": {"text_a": SENTENCES, "text_b": SENTENCES[::-1]},
    "squad": {"question": ["Who wrote it?", "Où ?", ""],
              "context": ["It was written by Ann Smith in 1990, in Zürich. " * 6, "Über Paris", ""]},
    "swag": {"context": ["A man sits at a piano.", "x"], "endings": [["He plays.", "He eats it."], ["", "y"]]},
    "ner": {"text": ["Angela Merkel visited Zürich .", "", "Ünïcödé Paris — Berlin"]},
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory, task_models):
    models = task_models
    folder = tmp_path_factory.mktemp("litert")
    paths = {}
    for name, model in models.items():
        paths[name] = str(folder / f"{name}.tflite")
        with open(paths[name], "wb") as f:
            f.write(convert(model))
    return models, paths


def _assert_same(got: dict, want: dict, skip=()):
    for key, value in want.items():
        if key in skip:
            continue
        assert key in got, f"{key} missing from the LiteRT outputs"
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[key], value, atol=1e-4, rtol=0, err_msg=key)
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize("name", list(INPUTS))
def test_every_kind_answers_as_its_serve(exports, name):
    """Then the same inputs in reverse order: a call whose shapes repeat the last one's skips LiteRT's
    re-preparation (LiteRTModel._run), and the text-dependent shapes inside must still follow the new texts."""
    models, paths = exports
    lite = LiteRTModel(paths[name])
    assert set(custom_ops(open(paths[name], "rb").read())) <= set(TFTEXT_OPS)
    for inputs in (INPUTS[name], {k: v[::-1] for k, v in INPUTS[name].items()}):
        got = lite.serve(**inputs)
        want = models[name].serve_numpy(*inputs.values())
        _assert_same(got, want, skip=("answer", "entity_text"))     # substrings: the runner's methods cut them


def _subgraph_ops(path) -> dict:
    """{signature's subgraph name: {op name: count}} of a .tflite."""
    from collections import Counter

    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.Model.GetRootAsModel(open(path, "rb").read(), 0)
    names = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    found = {}
    for g in range(model.SubgraphsLength()):
        graph, counts = model.Subgraphs(g), Counter()
        for i in range(graph.OperatorsLength()):
            code = model.OperatorCodes(graph.Operators(i).OpcodeIndex())
            counts[names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]] += 1
        found[graph.Name().decode()] = counts
    return found


@pytest.mark.parametrize("name", ["sst2", "mrpc", "stsb"])
def test_one_text_takes_the_one_text_signature_and_answers_as_its_serve(exports, name):
    """A classifier's file holds serving_one (a static batch of 1, the text packed to its own length: no
    real-token gathers or scatters, which XNNPACK does not take); LiteRTModel sends a single text there. Every
    sentence alone, in turn (lengths change while the shapes of the inputs repeat), equals the task model's serve."""
    models, paths = exports
    ops = _subgraph_ops(paths[name])
    assert ops["serving_default"]["SCATTER_ND"] > 0 and ops["serving_one"]["SCATTER_ND"] == 0, ops
    lite = LiteRTModel(paths[name])
    assert lite.meta["one_text_signature"] == "serving_one"
    for i in range(len(SENTENCES)):
        inputs = {k: v[i:i + 1] for k, v in INPUTS[name].items()}
        _assert_same(lite.serve(**inputs), models[name].serve_numpy(*inputs.values()))
    assert list(lite._shapes) == [id(lite.one_text_runner)]            # serving_default was never called
    assert "serving_one" not in _subgraph_ops(paths["ner"])             # the other kinds: serving_default only


def test_readable_methods_answer_as_the_task_models(exports):
    models, paths = exports
    text = INPUTS["sst2"]["text"]
    got, want = LiteRTModel(paths["sst2"]).classify(text), models["sst2"].classify(text)
    assert [g["label"] for g in got] == [w["label"] for w in want]
    np.testing.assert_allclose([g["probability"] for g in got], [w["probability"] for w in want], atol=1e-4)
    squad = INPUTS["squad"]
    got = LiteRTModel(paths["squad"]).answer(squad["question"], squad["context"])
    want = models["squad"].answer(squad["question"], squad["context"])
    assert [(g["text"], g["start"], g["end"]) for g in got] == [(w["text"], w["start"], w["end"]) for w in want]
    swag = INPUTS["swag"]
    got = LiteRTModel(paths["swag"]).choose(swag["context"], swag["endings"])
    want = models["swag"].choose(swag["context"], swag["endings"])
    assert [(g["choice"], g["ending"]) for g in got] == [(w["choice"], w["ending"]) for w in want]
    ner = INPUTS["ner"]["text"]
    assert LiteRTModel(paths["ner"]).entities(ner) == models["ner"].entities(ner)
    with pytest.raises(TypeError, match="classification model, not span"):
        LiteRTModel(paths["sst2"]).answer(["q"], ["c"])


def test_cli_writes_a_litert_file_the_runner_reads(exports, tmp_path):
    from bert_keras_cli.main import main
    models, _ = exports
    keras_file = str(tmp_path / "model.keras")
    models["sst2"].save(keras_file)
    out = str(tmp_path / "sst2.tflite")
    main(["export", "--model", keras_file, "--format", "litert", "--out", out])
    lite = LiteRTModel(out)
    assert lite.meta["precision"] == "fp32" and lite.meta["label_names"] == ["negative", "positive"]
    _assert_same(lite.serve(text=SENTENCES), models["sst2"].serve_numpy(SENTENCES))


# ---- MiniLM (slow) ----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_minilm_classifier_matches_its_serve_within_1e4(minilm_dir, tmp_path, shared_data):
    from bert_keras import load_checkpoint
    keras.utils.set_random_seed(0)
    _, encoder = load_checkpoint(minilm_dir)
    model = BertClassifier(encoder, 2, preprocessor=BertPreprocessor(f"{minilm_dir}/vocab.txt"))
    path = str(tmp_path / "minilm.tflite")
    with open(path, "wb") as f:
        f.write(convert(model))
    texts = corpora(shared_data)["sst2"][:256] + SENTENCES
    lite = LiteRTModel(path)
    for i in range(0, len(texts), 32):
        _assert_same(lite.serve(text=texts[i:i + 32]), model.serve_numpy(texts[i:i + 32]))
    for text in texts[:64] + SENTENCES:                                 # one at a time: serving_one
        _assert_same(lite.serve(text=[text]), model.serve_numpy([text]))


def _sst2_dev(shared_data):
    import csv
    with open(shared_data / "SST-2/dev.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    return [r[0] for r in rows], np.array([int(r[1]) for r in rows])


@pytest.mark.slow
def test_fp16_and_int8_sst2_accuracy_within_half_a_point_of_fp32(tmp_path, shared_data):
    """A MiniLM fine-tuned on the shipped SST-2 sample (or $BERT_KERAS_LITERT_SST2, a fine-tuned model.keras),
    all 872 SST-2 dev sentences."""
    from bert_keras.tasks import load_task_model
    trained = os.environ.get("BERT_KERAS_LITERT_SST2")
    if not trained:
        from bert_keras.finetune import FinetuneConfig, finetune
        from bert_keras.loading import bundled_minilm_folder
        samples = pathlib.Path(__file__).parents[2] / "bert_keras/data/samples"
        finetune(FinetuneConfig(task="sst-2", model=bundled_minilm_folder(), out=str(tmp_path / "ft"),
                                train=str(samples / "sst2_train.tsv"), eval=str(samples / "sst2_dev.tsv"),
                                epochs=1, batch_size=16, learning_rate=1e-4, progress=False))
        trained = str(tmp_path / "ft/model.keras")
    model = load_task_model(trained)
    texts, labels = _sst2_dev(shared_data)
    accuracy = {}
    for precision in ("fp32", "fp16", "int8"):
        path = str(tmp_path / f"{precision}.tflite")
        with open(path, "wb") as f:
            f.write(convert(model, precision))
        lite = LiteRTModel(path)
        predicted = np.concatenate([lite.serve(text=texts[i:i + 64])["label_id"] for i in range(0, len(texts), 64)])
        accuracy[precision] = float(np.mean(predicted == labels))
    print("SST-2 dev accuracy", accuracy)
    assert accuracy["fp32"] > 0.75
    assert abs(accuracy["fp16"] - accuracy["fp32"]) <= 0.005 and abs(accuracy["int8"] - accuracy["fp32"]) <= 0.005
