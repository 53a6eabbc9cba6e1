"""Server-side batching in the local server, as TF Serving's --enable_batching: concurrent single-sentence gRPC
requests run as fewer, larger Session.runs and get exactly the answers the model gives them alone; TF Serving's
refusals (unequal 0th dimensions, a task larger than max_batch_size, outputs not per example) and its
BatchingParameters text format."""

import concurrent.futures
import warnings

import grpc
import keras
import numpy as np
import pytest

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.tasks import BertClassifier, BertSpanLabeler
from savedmodels.batching import BatchingParameters
from savedmodels.client import ServingClient
from savedmodels.export import export_task_model, write_batching_parameters
from savedmodels.local_server import start_server
from savedmodels.session_bundle import SessionBundle

TEXTS = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "", "ok",
         "one more sentence here", "and another", "the last one ."]


@pytest.fixture(scope="module")
def exports(tmp_path_factory, minilm_vocab):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    base = tmp_path_factory.mktemp("serving")
    sst2 = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, label_names=["neg", "pos"], preprocessor=pre)
    mrpc = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, preprocessor=pre, segments=2)
    squad = BertSpanLabeler(BertEncoder(PRESETS["bert_tiny"]), pre, doc_stride=16, max_query_length=8)
    for name, model in (("sst2", sst2), ("mrpc", mrpc), ("squad", squad)):
        export_task_model(model, str(base), name, keras_file=False)
    return base, sst2


def test_concurrent_requests_run_batched_and_answer_as_alone(exports, monkeypatch):
    base, sst2 = exports
    runs = []
    original = SessionBundle._session_run
    monkeypatch.setattr(SessionBundle, "_session_run",
                        lambda self, name, inputs, aliases=None: runs.append(len(next(iter(inputs.values()))))
                        or original(self, name, inputs, aliases))
    params = BatchingParameters(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1)
    server, port = start_server({"sst2": str(base / "sst2")}, batching=params)
    try:
        runs.clear()                                                  # the warmup request ran at load

        def ask(text):
            client = ServingClient(f"127.0.0.1:{port}", "sst2")
            try:
                return client.predict({"text": [text]})
            finally:
                client.close()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, TEXTS * 3))
    finally:
        server.stop()
    assert sum(runs) == 24 and len(runs) < 24 and max(runs) > 1      # 24 requests, fewer and larger runs
    alone = keras.ops.convert_to_numpy(sst2.predict(TEXTS * 3, batch_size=1, verbose=0))
    np.testing.assert_allclose(np.concatenate([a["logits"] for a in answers]), alone, atol=1e-5, rtol=0)
    assert [a["label"][0].decode() for a in answers] == [["neg", "pos"][i] for i in alone.argmax(-1)]


def test_tf_servings_refusals(exports):
    base, _ = exports
    params = BatchingParameters(max_batch_size=4, batch_timeout_micros=1000, num_batch_threads=1)
    server, port = start_server({n: str(base / n) for n in ("mrpc", "squad", "sst2")}, batching=params)
    try:
        def error(model, inputs):
            client = ServingClient(f"127.0.0.1:{port}", model)
            try:
                with pytest.raises(grpc.RpcError) as e:
                    client.predict(inputs)
                return e.value
            finally:
                client.close()
        e = error("mrpc", {"text_a": ["a", "b"], "text_b": ["c"]})
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "equal 0th-dimension size" in e.details()
        e = error("sst2", {"text": ["x"] * 5})
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "Task size 5 is larger than maximum" in e.details()
        e = error("squad", {"question": ["Who?"], "context": ["Ann wrote it. " * 20]})
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and "cannot be served with batching" in e.details()
    finally:
        server.stop()


def test_batching_parameters_text_format(tmp_path):
    written = write_batching_parameters(str(tmp_path))
    params = BatchingParameters.read(written)
    assert (params.max_batch_size, params.batch_timeout_micros, params.num_batch_threads) == (8, 2000, 2)
    text = "# TF Serving's example\nmax_batch_size { value: 32 }\nbatch_timeout_micros { value: 0 }\n" \
           "allowed_batch_sizes: 8\nallowed_batch_sizes: 32\npad_variable_length_inputs: true\n"
    with pytest.warns(UserWarning, match="does not implement pad_variable_length_inputs"):
        params = BatchingParameters.parse(text)
    assert params.max_batch_size == 32 and params.allowed_batch_sizes == (8, 32)
    assert BatchingParameters.parse(params.to_text()) == params
    with pytest.warns(UserWarning, match=r"enable_large_batch_splitting \(TF Serving splits.*max_execution_batch"):
        BatchingParameters.parse("enable_large_batch_splitting { value: true }\nmax_execution_batch_size { value: 4 }")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # switched off, or TF Serving's names only: no warning
        BatchingParameters.parse("enable_large_batch_splitting { value: false }\nthread_pool_name { value: 'p' }")
    with pytest.raises(ValueError, match="unknown batching parameter.*max_batch"):
        BatchingParameters.parse("max_batch { value: 3 }")
    with pytest.raises(ValueError, match="must increase and end with max_batch_size"):
        BatchingParameters.parse("max_batch_size { value: 32 }\nallowed_batch_sizes: 16\n")
