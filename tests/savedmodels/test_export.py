"""Exports of every task kind, run the way TF Serving runs them: `loader.load` + `session.run` in a process that
imports only tensorflow and tensorflow_text (session_path.py), and TensorFlow's own `saved_model_cli run`. The
reference is the Keras model in this process on the same text. Also: weights only in variables/ (a trained
model's optimizer stays out), the op check, warmup records, the layout, and a failed export leaving nothing."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from savedmodels.batching import may_batch
from savedmodels.export import export_for_serving, export_task_model
from savedmodels.ops import saved_model_op_types, unsupported_ops
from session_path import run_signatures
from conftest import TASK_LABELS as LABELS
from conftest import TASK_TAGS as TAGS

SENTENCES = ["a charming and often affecting journey .", "Ünïcödé — “quoted” text", "", "   \t  "]
IDS = {"input_word_ids": [[101, 2204, 2143, 102, 0]], "input_mask": [[1, 1, 1, 1, 0]],
       "input_type_ids": [[0, 0, 0, 0, 0]]}


@pytest.fixture(scope="module")
def exports(tmp_path_factory, task_models):
    models = task_models
    assert len(models["sst2"].optimizer.variables) > 2 * len(models["sst2"].trainable_weights)   # slots: trained
    pre = models["sst2"].preprocessor
    base = tmp_path_factory.mktemp("serving")
    written = {name: export_for_serving(model, str(base), name) for name, model in models.items()}
    paths = {name: w.version for name, w in written.items()}
    return base, paths, models, pre, written


def _every_signature_against_keras(exports, python=sys.executable):
    base, paths, models, pre, _ = exports
    pairs = (SENTENCES, SENTENCES[::-1])
    questions = ["Who wrote it?", "Où ?"]
    contexts = ["It was written by Ann Smith in 1990, in Zürich. " * 6, "Über Paris"]
    swag_context, swag_endings = ["A man sits at a piano.", "x"], [["He plays.", "He eats it."], ["", "y"]]
    ner_texts = ["Angela Merkel visited Zürich .", ""]
    ner_long = [" ".join(["Angela Merkel visited Zürich and met the United Nations ."] * 50), "Paris"]   # 22 windows
    calls = {
        "sst2": {"signature": "serving_default", "inputs": {"text": SENTENCES}},
        "sst2/from_ids": {"signature": "from_ids", "inputs": IDS},
        "sst2/classify": {"signature": "classify", "examples": [{"text": s} for s in SENTENCES]},
        "mrpc": {"signature": "serving_default", "inputs": {"text_a": pairs[0], "text_b": pairs[1]}},
        "mrpc/from_ids": {"signature": "from_ids", "inputs": IDS},
        "mrpc/classify": {"signature": "classify", "examples": [{"text_a": a, "text_b": b} for a, b in zip(*pairs)]},
        "stsb": {"signature": "serving_default", "inputs": {"text_a": pairs[0], "text_b": pairs[1]}},
        "stsb/from_ids": {"signature": "from_ids", "inputs": IDS},
        "stsb/regress": {"signature": "regress", "examples": [{"text_a": a, "text_b": b} for a, b in zip(*pairs)]},
        "squad": {"signature": "serving_default", "inputs": {"question": questions, "context": contexts}},
        "swag": {"signature": "serving_default", "inputs": {"context": swag_context, "endings": swag_endings}},
        "ner": {"signature": "serving_default", "inputs": {"text": ner_texts}},
        "ner/long": {"signature": "serving_default", "inputs": {"text": ner_long}},
    }
    got = dict(zip(calls, run_signatures([{"path": paths[k.split("/")[0]], **c} for k, c in calls.items()], python)))
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=0)  # noqa: E731
    ids = {k: np.array(v, "int32") for k, v in IDS.items()}

    # Classification, pair classification, regression: every signature equals the model on the same text.
    single, pair = pre(SENTENCES), pre((tf.constant(pairs[0]), tf.constant(pairs[1])))
    for name, inputs in (("sst2", single), ("mrpc", pair), ("stsb", pair)):
        logits = models[name](inputs).numpy()
        close(got[name]["logits"], logits)
        close(got[f"{name}/from_ids"]["logits"], models[name](ids))
        if name == "stsb":
            close(got[name]["score"], logits[:, 0])
            close(got["stsb/regress"]["outputs"], logits[:, 0])
            assert got["stsb/regress"]["__method_name__"] == "tensorflow/serving/regress"
        else:
            close(got[name]["probabilities"], tf.nn.softmax(logits))
            close(got[f"{name}/classify"]["scores"], tf.nn.softmax(logits))
            assert got[f"{name}/classify"]["__method_name__"] == "tensorflow/serving/classify"
    assert got["sst2"]["label"] == [LABELS[i] for i in models["sst2"](single).numpy().argmax(-1)]
    assert got["sst2/classify"]["classes"] == [LABELS] * len(SENTENCES)
    assert got["mrpc/classify"]["classes"][0] == ["0", "1"]

    # SQuAD: answers and logits of the in-process answerer; offsets are characters of the context.
    want = models["squad"].answer_tensors(tf.constant(questions), tf.constant(contexts))
    squad = got["squad"]
    assert squad["answer"] == [a.decode() for a in want["answer"].numpy()]
    close(squad["start_logits"], want["start_logits"])
    close(squad["end_logits"], want["end_logits"])
    close(squad["score"], want["score"])
    for context, answer, start, end in zip(contexts, squad["answer"], squad["start"], squad["end"]):
        assert context[start:end] == answer
    assert max(squad["window_example"]) == 1 and squad["window_example"].count(0) > 1     # several windows

    # Multiple choice: each (context, ending) row through the model.
    tiled = tf.constant([[c] * 2 for c in swag_context])
    logits = models["swag"](pre((tiled, tf.constant(swag_endings)))).numpy()
    close(got["swag"]["logits"], logits)
    assert got["swag"]["prediction"] == logits.argmax(-1).tolist()

    # Tagging: one label per word piece, the argmax of the model's logits, with the pieces' character spans.
    logits = models["ner"](pre(ner_texts)).numpy()
    ner = got["ner"]
    for row, text in enumerate(ner_texts):
        n = sum(ner["token_mask"][row])
        pieces = pre.tokenize(tf.constant([text])).numpy()[0].tolist()
        assert ner["tokens"][row][:n] == [pre.vocab[i] for i in pieces]
        assert ner["labels"][row][:n] == [TAGS[i] for i in logits[row, 1:n + 1].argmax(-1)]
        for token, start, end in zip(ner["tokens"][row][:n], ner["start"][row], ner["end"][row]):
            assert text[start:end].lower().replace("ü", "u") == token.replace("##", "")
    assert sum(ner["token_mask"][0]) >= 5 and not any(ner["token_mask"][1])
    # A text longer than the sequence length: windowed in the graph, every piece labelled, the same entities as
    # the model's own entities() (tests/tasks/test_tagger_windows.py checks those against a reference).
    long, want = got["ner/long"], models["ner"].serve_numpy(ner_long)
    assert sum(long["token_mask"][0]) == len(pre.tokenize(tf.constant(ner_long[:1])).flat_values) > 500
    assert long["labels"] == [[x.decode() for x in row] for row in want["labels"]]
    assert [[(s, e, t, x) for s, e, t, x in zip(*row) if s >= 0] for row in zip(
        long["entity_start"], long["entity_end"], long["entity_type"], long["entity_text"])] == \
        models["ner"].entities(ner_long)


def test_every_signature_of_every_kind_on_the_session_path_equals_keras(exports):
    _every_signature_against_keras(exports)


@pytest.mark.slow
def test_every_signature_under_the_tensorflow_stock_tf_serving_2_12_links(exports):
    """TF 2.12.0 + TF.Text 2.12.1 (what tensorflow_model_server 2.12 links) in another virtual environment:
    BERT_KERAS_TF212_PYTHON=<venv>/bin/python, made with `pip install tensorflow-cpu==2.12.0 tensorflow-text==2.12.1`."""
    python = os.environ.get("BERT_KERAS_TF212_PYTHON")
    if not python:
        pytest.skip("set BERT_KERAS_TF212_PYTHON to a python with tensorflow 2.12.0 and tensorflow-text 2.12.1")
    version = subprocess.run([python, "-c", "import tensorflow as t, tensorflow_text as x; print(t.__version__, "
                              "x.__version__)"], capture_output=True, text=True).stdout.split()
    assert version[:1] == ["2.12.0"] and version[1:] == ["2.12.1"], version
    _every_signature_against_keras(exports, python)


def test_saved_model_cli_runs_the_export(exports, tmp_path):
    """TensorFlow's own `saved_model_cli run` code (loader.load + session.run), TF.Text imported first."""
    _, paths, models, pre, _ = exports
    texts = ["a charming and often affecting journey .", ""]

    def cli(*args, outdir):
        argv = ["saved_model_cli", "run", "--dir", paths["sst2"], "--tag_set", "serve", *args, "--outdir", outdir]
        script = ("import sys, tensorflow_text\nfrom tensorflow.python.tools import saved_model_cli\n"
                  f"sys.argv = {argv!r}\nsaved_model_cli.main()\n")
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        assert result.returncode == 0, result.stderr[-3000:]
        return {f[:-4]: np.load(os.path.join(outdir, f), allow_pickle=True) for f in os.listdir(outdir)}

    logits = models["sst2"](pre(texts)).numpy()
    out = cli("--signature_def", "serving_default", "--input_exprs", f"text={texts!r}", outdir=str(tmp_path / "a"))
    np.testing.assert_allclose(out["logits"], logits, atol=1e-5, rtol=0)
    assert [x.decode() for x in out["label"]] == [LABELS[i] for i in logits.argmax(-1)]
    examples = json.dumps([{"text": [t]} for t in texts])          # saved_model_cli makes the tf.Examples
    out = cli("--signature_def", "classify", "--input_examples", f"inputs={examples}", outdir=str(tmp_path / "b"))
    np.testing.assert_allclose(out["scores"], tf.nn.softmax(logits), atol=1e-5, rtol=0)


def test_variables_hold_the_weights_only(exports):
    """No optimizer slots, step counter or seed state: one checkpoint value per model weight, at most 1.25x the
    fp32 weight bytes (the sst2 model was trained a step, so it has an AdamW with slots)."""
    _, paths, models, _, _ = exports
    for name, path in paths.items():
        weights = models[name].weights
        values = [k for k, _ in tf.train.list_variables(os.path.join(path, "variables", "variables"))
                  if k.endswith("VARIABLE_VALUE")]
        assert len(values) == len(weights), (name, len(values), len(weights))
        size = sum(os.path.getsize(os.path.join(path, "variables", f)) for f in os.listdir(os.path.join(path, "variables")))
        fp32 = sum(int(np.prod(w.shape)) * 4 for w in weights)
        assert size <= 1.25 * fp32, (name, size, fp32)


def test_op_check_warmup_and_layout(exports):
    from tensorflow_serving.apis import prediction_log_pb2
    base, paths, _, _, _ = exports
    for name, path in paths.items():
        assert unsupported_ops(saved_model_op_types(path)) == set(), name
        assert path == str(base / name / "1") and (base / name / "model.keras").exists()
        records = list(tf.data.TFRecordDataset(os.path.join(path, "assets.extra", "tf_serving_warmup_requests")))
        assert records, name
        calls = []
        for record in records:
            request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
            assert request.model_spec.name == name
            inputs = {k: np.vectorize(bytes.decode, otypes=[object])(tf.make_ndarray(v)).tolist()
                      for k, v in request.inputs.items()}
            calls.append({"path": path, "signature": request.model_spec.signature_name, "inputs": inputs})
        run_signatures(calls)                                      # every warmup request runs on the session path
    config = (base / "models.config").read_text()
    assert all(f"name: '{n}'" in config and f"base_path: '/models/{n}'" in config for n in paths)
    assert sorted(os.listdir(base / "sst2")) == ["1", "model.keras"]             # no partial folders left


def test_a_failed_export_leaves_nothing(tmp_path):
    """An op the oldest stock server lacks (SegmentMaxV2 arrived after TF 2.12) fails the real op check, naming
    the op, and no folder is left: not the version, not the temporary one."""
    from savedmodels.saving import save_servable

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def newer_op(x):
        return {"max": tf.raw_ops.SegmentMaxV2(data=x, segment_ids=tf.zeros_like(x, tf.int32), num_segments=1)}
    (tmp_path / "m").mkdir()
    with pytest.raises(RuntimeError, match="SegmentMaxV2"):
        save_servable(str(tmp_path / "m" / "1"), {"serving_default": newer_op.get_concrete_function()})
    assert os.listdir(tmp_path / "m") == []


def test_export_for_serving_writes_the_server_files_and_a_serve_command_that_fits(exports):
    base, _, models, _, written = exports
    assert written["ner"].model_names == tuple(sorted(models))          # models.config lists every model so far
    config = open(written["ner"].models_config, encoding="utf-8").read()
    assert all(f"name: '{n}'" in config and f"base_path: '/models/{n}'" in config for n in models)
    assert open(written["ner"].batching_parameters, encoding="utf-8").read().startswith("max_batch_size")
    # Span models' per-window outputs lack the batch dimension, which TF Serving's batching requires of every
    # output (test_batching.py: FAILED_PRECONDITION), and --enable_batching holds for every model of the server:
    # once models.config lists squad, no serve command turns batching on (swag's and ner's, exported after it).
    # sst2 was trained a step (it holds an optimizer with slots): its serving copy holds the model only.
    assert getattr(keras.models.load_model(written["sst2"].keras_file), "optimizer", None) is None  # never compiled
    assert models["sst2"].optimizer is not None
    for name, w in written.items():
        command = w.serve_command()
        assert f"-v {os.path.abspath(str(base))}:/models" in command and "--model_config_file=/models/models.config" in command
        span_listed = "squad" in w.model_names
        assert ("--enable_batching" in command) == (not span_listed), (name, command)
        assert w.unbatchable == (("squad",) if span_listed else ()), name
    assert [name for name, w in written.items() if w.batchable] == ["sst2", "mrpc", "stsb"]     # before squad
    assert not may_batch(str(base / "sst2")) and may_batch(written["sst2"].version)      # no saved_model.pb: off
