"""Exports of every task kind: raw text in, in a process that imports only tensorflow and tensorflow_text; through
the gRPC client (Predict, Classify, Regress, metadata); the op check; warmup requests; the bad-input matrix."""

import json
import os
import subprocess
import sys

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.finetune.squad import SquadAnswerer
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger
from savedmodels.client import ServingClient
from savedmodels.export import export_task_model, write_models_config
from savedmodels.local_server import start_server
from savedmodels.ops import saved_model_op_types, unsupported_ops

LABELS = ["negative", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCES = ["a charming and often affecting journey .", "Ünïcödé — “quoted” text", "", "   \t  "]


@pytest.fixture(scope="module")
def exports(tmp_path_factory, minilm_vocab):
    keras.utils.set_random_seed(1)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    encoder = lambda: BertEncoder(PRESETS["bert_tiny"])  # noqa: E731
    models = {"sst2": (BertClassifier(encoder(), 2, label_names=LABELS), {"segments": 1}),
              "mrpc": (BertClassifier(encoder(), 2), {"segments": 2}),
              "stsb": (BertClassifier(encoder(), 1), {"segments": 2}),
              "squad": (BertSpanLabeler(encoder()), {"doc_stride": 16, "max_query_length": 8}),
              "swag": (BertMultipleChoice(encoder()), {}),
              "ner": (BertTagger(encoder(), len(TAGS)), {"labels": TAGS})}
    base = tmp_path_factory.mktemp("serving")
    paths = {name: export_task_model(model, pre, str(base), name, task_info=info)
             for name, (model, info) in models.items()}
    write_models_config(str(base), list(models))
    return base, paths, {name: model for name, (model, _) in models.items()}, pre


def _fresh(script, cwd):
    """Runs `script` in a new interpreter that imports only tensorflow and tensorflow_text; returns its JSON."""
    prologue = "import sys, json, numpy as np, tensorflow as tf, tensorflow_text\n"
    epilogue = "\nassert not [m for m in sys.modules if m.startswith(('bert_keras', 'savedmodels'))]\n"
    result = subprocess.run([sys.executable, "-c", prologue + script + epilogue], capture_output=True, text=True,
                            cwd=cwd, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_signature_answers_raw_text_in_a_fresh_process(exports):
    base, paths, models, pre = exports
    got = _fresh(f"""
paths = {json.dumps(paths)}
out = {{}}
def run(name, signature, **inputs):
    m = tf.saved_model.load(paths[name])
    result = m.signatures[signature](**{{k: tf.constant(v) for k, v in inputs.items()}})
    out[name + "/" + signature] = {{k: (np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v.numpy())
                                        if v.dtype == tf.string else v.numpy()).tolist() for k, v in result.items()}}
    out[name + "/signatures"] = sorted(m.signatures)
s = {SENTENCES!r}
run("sst2", "serving_default", text=s)
run("sst2", "from_ids", input_word_ids=[[101, 2204, 102]], input_mask=[[1, 1, 1]], input_type_ids=[[0, 0, 0]])
run("mrpc", "serving_default", text_a=s, text_b=s[::-1])
run("stsb", "serving_default", text_a=s, text_b=s)
run("squad", "serving_default", question=["Who wrote it?", "Où ?"],
    context=["It was written by Ann Smith in 1990, in Zürich. " * 6, "Über Paris"])
run("swag", "serving_default", context=["A man sits at a piano.", "x"], endings=[["He plays.", "He eats it."], ["", "y"]])
run("ner", "serving_default", text=["Angela Merkel visited Zürich .", ""])
print(json.dumps(out))
""", base)
    assert got["sst2/signatures"] == ["classify", "from_ids", "serving_default"]
    assert got["stsb/signatures"] == ["from_ids", "regress", "serving_default"]
    # In-process references (the model on the preprocessor's ids) for the same inputs.
    ids = pre(SENTENCES)
    np.testing.assert_allclose(got["sst2/serving_default"]["logits"], models["sst2"](ids), atol=1e-5)
    assert got["sst2/serving_default"]["label"] == [LABELS[i] for i in np.argmax(models["sst2"](ids), -1)]
    np.testing.assert_allclose(got["sst2/from_ids"]["logits"],
                               models["sst2"]({"input_word_ids": np.array([[101, 2204, 102]], "int32"),
                                               "input_mask": np.ones([1, 3], "int32"),
                                               "input_type_ids": np.zeros([1, 3], "int32")}), atol=1e-5)
    pair = pre((tf.constant(SENTENCES), tf.constant(SENTENCES[::-1])))
    np.testing.assert_allclose(got["mrpc/serving_default"]["logits"], models["mrpc"](pair), atol=1e-5)
    assert len(got["stsb/serving_default"]["score"]) == 4
    # SQuAD: the same answers as the in-process answerer; offsets are characters of the context.
    contexts = ["It was written by Ann Smith in 1990, in Zürich. " * 6, "Über Paris"]
    squad = got["squad/serving_default"]
    want = SquadAnswerer(models["squad"], pre, doc_stride=16, max_query_length=8)(
        tf.constant(["Who wrote it?", "Où ?"]), tf.constant(contexts))
    assert squad["answer"] == [a.decode() for a in want["answer"].numpy()]
    for context, answer, start, end in zip(contexts, squad["answer"], squad["start"], squad["end"]):
        assert context[start:end] == answer
    assert max(squad["window_example"]) == 1 and squad["window_example"].count(0) > 1     # several windows
    swag = got["swag/serving_default"]
    assert np.asarray(swag["probabilities"]).shape == (2, 2)
    ner = got["ner/serving_default"]
    tokens = [t for t, m in zip(ner["tokens"][0], ner["token_mask"][0]) if m]
    assert tokens == ["angela", "merkel", "visited", "zurich", "."] or tokens[0] == "angela"
    text = "Angela Merkel visited Zürich ."
    for token, start, end, m in zip(ner["tokens"][0], ner["start"][0], ner["end"][0], ner["token_mask"][0]):
        if m:
            assert text[start:end].lower().replace("ü", "u") == token.replace("##", "")
    assert set(ner["labels"][0]) <= set(TAGS) | {""} and not any(ner["token_mask"][1])


def test_op_check_warmup_and_layout(exports):
    base, paths, _, _ = exports
    for name, path in paths.items():
        assert unsupported_ops(saved_model_op_types(path)) == set(), name
        assert path == str(base / name / "1") and (base / name / "model.keras").exists()
        records = list(tf.data.TFRecordDataset(os.path.join(path, "assets.extra", "tf_serving_warmup_requests")))
        assert records, name
        from tensorflow_serving.apis import prediction_log_pb2
        log = prediction_log_pb2.PredictionLog.FromString(records[0].numpy())
        loaded = tf.saved_model.load(path)
        request = log.predict_log.request
        assert request.model_spec.name == name
        inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
        loaded.signatures[request.model_spec.signature_name](**inputs)           # the warmup request runs
    config = (base / "models.config").read_text()
    assert all(f"name: '{n}'" in config and f"base_path: '/models/{n}'" in config for n in paths)
    assert sorted(os.listdir(base / "sst2")) == ["1", "model.keras"]             # no partial folders left


def test_grpc_predict_classify_regress_and_metadata(exports):
    base, paths, models, pre = exports
    server, port = start_server({name: str(base / name) for name in paths})
    try:
        address = f"127.0.0.1:{port}"
        sst2 = ServingClient(address, "sst2")
        out = sst2.predict({"text": np.array(SENTENCES[:2], object)})
        classes = sst2.classify([{"text": s} for s in SENTENCES[:2]])
        assert [c for c, _ in classes[0]] == LABELS
        np.testing.assert_allclose([[s for _, s in row] for row in classes], out["probabilities"], atol=1e-6)
        assert set(sst2.metadata()) == {"serving_default", "classify", "from_ids"}
        stsb = ServingClient(address, "stsb")
        scores = stsb.regress([{"text_a": "a b", "text_b": "c d"}, {"text_a": "", "text_b": "x"}])
        want = stsb.predict({"text_a": np.array(["a b", ""], object), "text_b": np.array(["c d", "x"], object)})
        np.testing.assert_allclose(scores, want["score"], atol=1e-6)
        with pytest.raises(grpc.RpcError) as e:                                   # Classify needs a classify method
            ServingClient(address, "squad").classify([{"question": "q"}], signature="serving_default")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        server.stop(0)


def test_bad_input_matrix(exports):
    base, paths, _, _ = exports
    sst2 = tf.saved_model.load(paths["sst2"]).signatures["serving_default"]
    mrpc = tf.saved_model.load(paths["mrpc"]).signatures["serving_default"]
    squad = tf.saved_model.load(paths["squad"]).signatures["serving_default"]
    swag = tf.saved_model.load(paths["swag"]).signatures["serving_default"]
    ner = tf.saved_model.load(paths["ner"]).signatures["serving_default"]
    defined = {
        "empty strings": lambda: sst2(text=tf.constant(["", ""])),
        "whitespace only": lambda: sst2(text=tf.constant([" \t\n "])),
        "1 MB text": lambda: sst2(text=tf.constant(["word " * 200_000])),
        "invalid UTF-8": lambda: sst2(text=tf.constant([b"caf\xff\xfe", b"\xc3"])),
        "control characters": lambda: sst2(text=tf.constant(["a\x00b\x07c\u200b\ufffd"])),
        "empty batch": lambda: sst2(text=tf.constant([], tf.string)),
        "empty batch (ner)": lambda: ner(text=tf.constant([], tf.string)),
        "empty question and context": lambda: squad(question=tf.constant([""]), context=tf.constant([""])),
        "1 MB context": lambda: squad(question=tf.constant(["what?"]), context=tf.constant(["word " * 20_000])),
        "many endings": lambda: swag(context=tf.constant(["c"]), endings=tf.constant([["e"] * 12])),
        "one ending": lambda: swag(context=tf.constant(["c"]), endings=tf.constant([["e"]])),
    }
    for name, call in defined.items():
        out = call()
        # Scores may be -inf by design (no valid span); every other float output must be finite.
        assert all(np.all(np.isfinite(v.numpy())) for k, v in out.items() if v.dtype.is_floating
                   and "score" not in k), name
    assert sst2(text=tf.constant([], tf.string))["logits"].shape == (0, 2)
    assert squad(question=tf.constant([""]), context=tf.constant([""]))["answer"].numpy().tolist() == [b""]
    errors = {
        "mismatched batch sizes (pair)": (lambda: mrpc(text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"])),
                                          "text_a and text_b must have the same batch size"),
        "mismatched batch sizes (squad)": (lambda: squad(question=tf.constant(["a", "b"]),
                                                         context=tf.constant(["c"])),
                                           "question and context must have the same batch size"),
        "no endings": (lambda: swag(context=tf.constant(["c"]), endings=tf.zeros([1, 0], tf.string)),
                       "endings must hold at least one ending"),
        "mismatched endings batch": (lambda: swag(context=tf.constant(["c", "d"]), endings=tf.constant([["e"]])),
                                     "context and endings must have the same batch size"),
        "wrong dtype": (lambda: sst2(text=tf.constant([1, 2])), "string"),
        "wrong rank": (lambda: sst2(text=tf.constant([["a"]])), "shape"),
    }
    for name, (call, message) in errors.items():
        with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)) as e:
            call()
        assert message in str(e.value), (name, str(e.value)[:300])


def test_a_failed_export_leaves_nothing(exports, monkeypatch, tmp_path):
    import savedmodels.export as export
    _, _, models, pre = exports
    monkeypatch.setattr(export, "unsupported_ops", lambda ops: {"NewerTextOp"})
    with pytest.raises(RuntimeError, match="NewerTextOp"):
        export.export_task_model(models["sst2"], pre, str(tmp_path), "m", keras_file=False)
    assert os.listdir(tmp_path / "m") == []
