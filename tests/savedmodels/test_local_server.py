"""The local TF Serving over gRPC, on the session path: exports of the task kinds answer as the Keras models do;
the bad-input matrix gets TF Serving's status codes and the server keeps serving; a version whose restore or
warmup fails is refused with a log line while the old one serves; 8 clients x 200 requests across a version swap
lose nothing and each answer comes whole from the version it names."""

import concurrent.futures
import logging
import os
import shutil
import threading

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.tasks import BertClassifier, BertSpanLabeler
from savedmodels.client import ServingClient
from savedmodels.export import export_task_model
from savedmodels.local_server import start_server

LABELS = ["negative", "positive"]
TEXTS = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "", "ok"]
LOG = "savedmodels.local_server"


def _classifier(seed, num_classes=2, **kwargs):
    keras.utils.set_random_seed(seed)
    return BertClassifier(BertEncoder(PRESETS["bert_tiny"]), num_classes, **kwargs)


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm_vocab):
    """sst2 (v1), mrpc, stsb, squad exports under one base path, a staging path with more versions, a server."""
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    base, staging = tmp_path_factory.mktemp("serving"), tmp_path_factory.mktemp("staging")
    models = {"sst2": _classifier(1, label_names=LABELS, preprocessor=pre),
              "mrpc": _classifier(2, preprocessor=pre, segments=2), "stsb": _classifier(3, 1, preprocessor=pre,
                                                                                      segments=2),
              "other": _classifier(4, label_names=LABELS, preprocessor=pre)}
    for name in ("sst2", "mrpc", "stsb"):
        export_task_model(models[name], str(base), name, keras_file=False)
    keras.utils.set_random_seed(5)
    export_task_model(BertSpanLabeler(BertEncoder(PRESETS["bert_tiny"]), pre, doc_stride=16, max_query_length=8),
                      str(base), "squad", keras_file=False)
    # The swap test's model: v1 = sst2's weights; v2 (staged) = other weights.
    export_task_model(models["sst2"], str(base), "swap", keras_file=False)
    export_task_model(models["other"], str(staging), "swap", version=2, keras_file=False)
    shutil.copytree(base / "swap", base / "refuse")                       # v1 of the refusal test
    names = ["sst2", "mrpc", "stsb", "squad", "swap", "refuse"]
    server, port = start_server({n: str(base / n) for n in names}, poll_seconds=0.1, retry_seconds=3600)
    yield {"server": server, "address": f"127.0.0.1:{port}", "base": base, "staging": staging, "models": models,
           "pre": pre}
    server.stop()


def _predict(address, model, inputs, signature="serving_default", version=None):
    client = ServingClient(address, model, version=version)
    try:
        return client.predict(inputs, signature=signature)
    finally:
        client.close()


def _error(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value


def test_predict_classify_regress_and_metadata_equal_the_keras_models(served):
    address, models, pre = served["address"], served["models"], served["pre"]
    logits = models["sst2"](pre(TEXTS)).numpy()
    out = _predict(address, "sst2", {"text": np.array(TEXTS, object)})
    np.testing.assert_allclose(out["logits"], logits, atol=1e-5, rtol=0)
    assert [x.decode() for x in out["label"]] == [LABELS[i] for i in logits.argmax(-1)]
    sst2 = ServingClient(address, "sst2")
    classes = sst2.classify([{"text": t} for t in TEXTS])
    assert [c for c, _ in classes[0]] == LABELS
    np.testing.assert_allclose([[s for _, s in row] for row in classes], tf.nn.softmax(logits), atol=1e-5)
    assert set(sst2.metadata()) == {"serving_default", "classify", "from_ids"}
    ids = {"input_word_ids": np.array([[101, 2204, 102]], "int32"), "input_mask": np.ones([1, 3], "int32"),
           "input_type_ids": np.zeros([1, 3], "int32")}
    np.testing.assert_allclose(sst2.predict(ids, signature="from_ids")["logits"], models["sst2"](ids), atol=1e-5)
    pairs = (tf.constant(TEXTS), tf.constant(TEXTS[::-1]))
    stsb = ServingClient(address, "stsb")
    scores = stsb.regress([{"text_a": a, "text_b": b} for a, b in zip(TEXTS, TEXTS[::-1])])
    np.testing.assert_allclose(scores, models["stsb"](pre(pairs)).numpy()[:, 0], atol=1e-5)
    mrpc = _predict(address, "mrpc", {"text_a": np.array(TEXTS, object), "text_b": np.array(TEXTS[::-1], object)})
    np.testing.assert_allclose(mrpc["logits"], models["mrpc"](pre(pairs)), atol=1e-5)
    squad = _predict(address, "squad", {"question": np.array(["Who wrote it?"], object),
                                        "context": np.array(["It was written by Ann Smith."], object)})
    assert squad["answer"][0].decode() in "It was written by Ann Smith."
    for client in (sst2, stsb):
        client.close()


def test_bad_input_matrix_gets_tf_serving_codes_and_the_server_keeps_serving(served):
    address, models, pre = served["address"], served["models"], served["pre"]
    text = lambda values: {"text": np.array(values, object)}           # noqa: E731
    # Defined results, equal to the model on the same bytes.
    for name, values in {"empty string": [""], "1 MB string": ["word " * 200_000],
                         "invalid UTF-8": [b"caf\xff\xfe", b"\xc3"], "controls": ["a\x00b\x07c\u200b\ufffd"]}.items():
        out = _predict(address, "sst2", text(values))
        np.testing.assert_allclose(out["logits"], models["sst2"](pre(tf.constant(values))), atol=1e-5,
                                   err_msg=name)
    assert _predict(address, "sst2", text(np.zeros([0], object)))["logits"].shape == (0, 2)            # batch 0
    big = [TEXTS[i % len(TEXTS)] + f" {i}" for i in range(4096)]
    out = _predict(address, "sst2", text(big))
    assert out["logits"].shape == (4096, 2)
    np.testing.assert_allclose(out["logits"][::257], models["sst2"](pre(big[::257])), atol=1e-5)
    squad = _predict(address, "squad", {"question": np.array([""], object), "context": np.array([""], object)})
    assert squad["answer"].tolist() == [b""]
    # Refusals: the code TF Serving gives, and a message that names the problem.
    errors = {
        "wrong dtype": (lambda: _predict(address, "sst2", {"text": np.array([1, 2], "int32")}),
                        grpc.StatusCode.INVALID_ARGUMENT, "input 'text' expects string but int32 is provided"),
        "wrong rank": (lambda: _predict(address, "sst2", text([["a"]])), grpc.StatusCode.INVALID_ARGUMENT,
                       "input 'text' has shape [1, 1]"),
        "unknown signature": (lambda: _predict(address, "sst2", text(["a"]), signature="nope"),
                              grpc.StatusCode.FAILED_PRECONDITION, 'Serving signature key "nope" not found.'),
        "missing input": (lambda: _predict(address, "mrpc", {"text_a": np.array(["a"], object)}),
                          grpc.StatusCode.INVALID_ARGUMENT, "Missing but required: {text_b}"),
        "extra input": (lambda: _predict(address, "sst2", {**text(["a"]), "x": np.array(["b"], object)}),
                        grpc.StatusCode.INVALID_ARGUMENT, "Sent extra: {x}"),
        "batch sizes differ": (lambda: _predict(address, "mrpc", {"text_a": np.array(["a", "b"], object),
                                                                  "text_b": np.array(["c"], object)}),
                               grpc.StatusCode.INVALID_ARGUMENT, "text_a and text_b must have the same batch size"),
        "version that does not exist": (lambda: _predict(address, "sst2", text(["a"]), version=7),
                                        grpc.StatusCode.NOT_FOUND, "Specific(sst2, 7)"),
        "model that does not exist": (lambda: _predict(address, "nope", text(["a"])),
                                      grpc.StatusCode.NOT_FOUND, "Latest(nope)"),
        "classify on a predict signature": (
            lambda: ServingClient(address, "squad").classify([{"question": "q"}], signature="serving_default"),
            grpc.StatusCode.INVALID_ARGUMENT, "method_name to be tensorflow/serving/classify"),
        "classify without examples": (lambda: ServingClient(address, "sst2").classify([]),
                                      grpc.StatusCode.INVALID_ARGUMENT, "Input is empty."),
        "unknown output": (lambda: ServingClient(address, "sst2").predict(text(["a"]), output_filter=["nope"]),
                           grpc.StatusCode.INVALID_ARGUMENT, "output tensor alias not found in signature: nope"),
    }
    for name, (call, code, message) in errors.items():
        error = _error(call)
        assert error.code() == code and message in error.details(), (name, error.code(), error.details()[:300])
    out = _predict(address, "sst2", text(TEXTS))                       # still serving, still right
    np.testing.assert_allclose(out["logits"], models["sst2"](pre(TEXTS)), atol=1e-5)


def _drop_version(src, base_path, version):
    """A version folder appears whole, as export_task_model publishes it: written beside, then renamed."""
    tmp = os.path.join(base_path, f".{version}.partial")
    shutil.copytree(src, tmp)
    return tmp, os.path.join(base_path, str(version))


def test_a_version_that_cannot_load_is_refused_and_the_old_one_keeps_serving(served, caplog):
    server, address, base, models, pre = (served[k] for k in ("server", "address", "base", "models", "pre"))
    caplog.set_level(logging.INFO, logger=LOG)
    want = models["sst2"](pre(TEXTS)).numpy()
    # v2: a corrupt variables/ (the data file truncated to half).
    tmp, final = _drop_version(base / "refuse" / "1", base / "refuse", 2)
    data = [f for f in os.listdir(os.path.join(tmp, "variables")) if f.startswith("variables.data")][0]
    path = os.path.join(tmp, "variables", data)
    os.truncate(path, os.path.getsize(path) // 2)
    os.rename(tmp, final)
    server.poll_now()
    assert server.serving_version("refuse") == 1
    refusal = [r.getMessage() for r in caplog.records if "version 2 refused" in r.getMessage()]
    assert refusal and "loading" in refusal[0] and "version 1 keeps serving" in refusal[0], refusal
    out = ServingClient(address, "refuse").predict({"text": np.array(TEXTS, object)})
    np.testing.assert_allclose(out["logits"], want, atol=1e-5)
    # v3: sound weights, but a warmup request its signature refuses (TF Serving refuses such a version too).
    tmp, final = _drop_version(base / "refuse" / "1", base / "refuse", 3)
    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name="refuse"))
    request.inputs["sentence"].CopyFrom(tf.make_tensor_proto(["a"]))
    with tf.io.TFRecordWriter(os.path.join(tmp, "assets.extra", "tf_serving_warmup_requests")) as writer:
        writer.write(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())
    os.rename(tmp, final)
    server.poll_now()
    assert server.serving_version("refuse") == 1
    refusal = [r.getMessage() for r in caplog.records if "version 3 refused" in r.getMessage()]
    assert refusal and "warmup request 1 of 1" in refusal[0] and "Missing but required: {text}" in refusal[0]
    with pytest.raises(grpc.RpcError) as e:
        ServingClient(address, "refuse", version=3).predict({"text": np.array(["a"], object)})
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    np.testing.assert_allclose(ServingClient(address, "refuse").predict({"text": np.array(TEXTS, object)})["logits"],
                               want, atol=1e-5)


def test_eight_clients_across_a_version_swap_lose_nothing(served, caplog):
    server, address, base, staging, models, pre = (served[k] for k in ("server", "address", "base", "staging",
                                                                         "models", "pre"))
    caplog.set_level(logging.INFO, logger=LOG)
    clients, requests = 8, 200
    # Real SST-2 sentences, 32 a request: the second half of the traffic outlasts loading the new version.
    from bert_keras.data import read_glue
    from bert_keras.data import SAMPLES
    sentences = [e.text_a for e in read_glue("sst-2", os.path.join(SAMPLES, "sst2_dev.tsv"))[0]][:256]
    batches = [sentences[i:i + 32] for i in range(0, len(sentences), 32)]
    references = {(v, i): m(pre(b)).numpy() for v, m in ((1, models["sst2"]), (2, models["other"]))
                  for i, b in enumerate(batches)}
    done, dropped = [0], threading.Event()
    lock = threading.Lock()

    def client(k):
        stub = ServingClient(address, "swap")
        answers = []
        for i in range(requests):
            batch = batches[(k * requests + i) % len(batches)]
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "swap"
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(batch))
            response = stub.stub.Predict(request, timeout=60)
            answers.append(((k * requests + i) % len(batches), response.model_spec.version.value,
                            tf.make_ndarray(response.outputs["logits"])))
            with lock:
                done[0] += 1
                if done[0] == clients * requests // 2:
                    dropped.set()
        stub.close()
        return answers

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client, k) for k in range(clients)]
        assert dropped.wait(120)
        os.rename(staging / "swap" / "2", base / "swap" / "2")           # the new version appears, whole
        swapped_at = done[0]
        while server.serving_version("swap") != 2 and not all(f.done() for f in futures):
            threading.Event().wait(0.01)
        swapped_at = (swapped_at, done[0])
        results = [f.result() for f in futures]                          # any RPC error fails here
    assert sum(len(r) for r in results) == clients * requests            # nothing lost
    seen = {}
    for answers in results:
        versions = [v for _, v, _ in answers]
        assert versions == sorted(versions)                              # never back to the old version
        for batch, version, logits in answers:
            seen[version] = seen.get(version, 0) + 1
            np.testing.assert_allclose(logits, references[version, batch], atol=1e-5)
    assert set(seen) == {1, 2} and seen[1] >= clients * requests // 2, (seen, swapped_at)
    assert server.serving_version("swap") == 2
    assert any("swap: now serving version 2" in r.getMessage() for r in caplog.records)


STOP_SCRIPT = """
import concurrent.futures, sys, threading
import grpc
from savedmodels.local_server import LocalServer
server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
if sys.argv[1] == "hangs":                      # a gRPC server whose stop never completes
    server.stop = lambda grace: threading.Event()
LocalServer(server, {}, poll_seconds=60).wait_for_signal(lambda: print("up", port, flush=True), stop_seconds=2)
"""


@pytest.mark.parametrize("how,code", [("stops", 0), ("hangs", 1)])
def test_a_signal_stops_the_server_and_a_stop_that_hangs_still_ends_the_process(how, code):
    """`bert-keras serve`'s wait: SIGTERM (docker stop) ends a real gRPC server's process with status 0; a stop
    that never completes ends it after stop_seconds with status 1 and every thread's stack on stderr."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import REPO
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    process = subprocess.Popen([sys.executable, "-c", STOP_SCRIPT, how], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    assert process.stdout.readline().startswith("up"), process.stderr.read()
    start = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    if how == "hangs":
        assert "did not stop within 2 s" in stderr and "Thread" in stderr, stderr
        assert 2 <= time.monotonic() - start < 30
    else:
        assert time.monotonic() - start < 10 and "Traceback" not in stderr, stderr
