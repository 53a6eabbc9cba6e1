"""Server-side batching in the local server, as TF Serving's --enable_batching: concurrent single-sentence gRPC
requests run as fewer, larger Session.runs and get exactly the answers the model gives them alone; TF Serving's
refusals (unequal 0th dimensions, a task larger than max_batch_size, outputs not per example, unequal shapes
without padding), large-batch splitting, padding to allowed sizes and of variable-length inputs, and its
BatchingParameters text format."""

import concurrent.futures
import threading

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


def test_concurrent_requests_run_batched_and_answer_as_alone(exports):
    base, sst2 = exports
    params = BatchingParameters(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1)
    server, port = start_server({"sst2": str(base / "sst2")}, batching=params)
    try:
        runs = server.models["sst2"].current.bundle.batcher.batch_sizes
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
    # Every field of TF Serving's BatchingParameters (session_bundle_config.proto), in its text format.
    text = ("# TF Serving's example\nmax_batch_size { value: 32 }\nbatch_timeout_micros { value: 0 }\n"
            "max_enqueued_batches { value: 7 }\nnum_batch_threads { value: 3 }\nthread_pool_name { value: 'pool' }\n"
            "enable_large_batch_splitting { value: true }\nmax_execution_batch_size { value: 16 }\n"
            "allowed_batch_sizes: 8\nallowed_batch_sizes: 16\npad_variable_length_inputs: true\n")
    params = BatchingParameters.parse(text)
    assert params == BatchingParameters(32, 0, 7, 3, "pool", True, 16, (8, 16), True)
    assert params.execution_batch_size == 16
    assert BatchingParameters.parse(params.to_text()) == params
    with pytest.raises(ValueError, match="unknown batching parameter 'max_batch'"):
        BatchingParameters.parse("max_batch { value: 3 }")
    with pytest.raises(ValueError, match=r"write pad_variable_length_inputs: \.\.\."):
        BatchingParameters.parse("pad_variable_length_inputs { value: true }")
    with pytest.raises(ValueError, match="last entry of allowed_batch_sizes must equal max_batch_size"):
        BatchingParameters.parse("max_batch_size { value: 32 }\nallowed_batch_sizes: 16\n")
    with pytest.raises(ValueError, match="must equal max_execution_batch_size"):
        BatchingParameters.parse("max_batch_size { value: 32 }\nenable_large_batch_splitting { value: true }\n"
                                 "max_execution_batch_size { value: 8 }\nallowed_batch_sizes: 32\n")
    with pytest.raises(ValueError, match="only used with enable_large_batch_splitting"):
        BatchingParameters.parse("max_execution_batch_size { value: 4 }")
    with pytest.raises(ValueError, match="max_batch_size must be positive"):
        BatchingParameters.parse("max_batch_size { value: 0 }")


def _echo_batcher(params):
    """A Batcher over a function that records each batch's inputs and answers row i with row i's input: what the
    scheduler does is seen without a model."""
    from savedmodels.batching import Batcher
    seen = []

    def run(signature, inputs):
        seen.append({a: v.copy() for a, v in inputs.items()})
        return {"echo": inputs["x"]}
    return Batcher(run, params), seen


def _together(batcher, requests):
    """Sends the requests from one thread each, all before the batch timeout ends."""
    results, errors = [None] * len(requests), []

    def send(i):
        try:
            results[i] = batcher.run("serving_default", requests[i])
        except Exception as e:                            # noqa: BLE001  (raised on the test's thread below)
            errors.append(e)
    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_large_batch_splitting_runs_execution_sized_batches_and_joins_the_answer():
    params = BatchingParameters(max_batch_size=10, batch_timeout_micros=50_000, num_batch_threads=1,
                                enable_large_batch_splitting=True, max_execution_batch_size=4)
    batcher, seen = _echo_batcher(params)
    try:
        x = np.arange(10)[:, None]
        (out,) = _together(batcher, [{"x": x}])
        np.testing.assert_array_equal(out["echo"], x)                 # the pieces come back in order
        assert batcher.batch_sizes == [4, 4, 2]
        with pytest.raises(Exception, match="Task size 11 is larger than maximum input batch size 10"):
            batcher.run("serving_default", {"x": np.arange(11)[:, None]})
    finally:
        batcher.stop()


def test_allowed_sizes_pad_with_the_last_requests_first_row_and_variable_lengths_pad_or_fail():
    params = BatchingParameters(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1,
                                allowed_batch_sizes=(4, 8), pad_variable_length_inputs=True)
    batcher, seen = _echo_batcher(params)
    try:
        a, b = np.array([[1, 2, 3]]), np.array([[7, 8], [9, 10]])
        answers = _together(batcher, [{"x": a}, {"x": b}])
        (batch,) = seen
        assert batch["x"].shape == (4, 3) and batcher.batch_sizes == [4]
        # Each request's rows padded past dimension 0 with the tensor's first value, then the last request's
        # first row (as padded) fills the batch up to the allowed size.
        rows = {tuple(r) for r in batch["x"][:3]}
        assert rows == {(1, 2, 3), (7, 8, 7), (9, 10, 7)}
        last_first = batch["x"][1] if tuple(batch["x"][1]) == (7, 8, 7) else batch["x"][0]
        np.testing.assert_array_equal(batch["x"][3], last_first)
        assert sorted(len(r["echo"]) for r in answers) == [1, 2]
    finally:
        batcher.stop()
    batcher, _ = _echo_batcher(BatchingParameters(max_batch_size=8, batch_timeout_micros=200_000,
                                                  num_batch_threads=1))
    try:
        with pytest.raises(Exception, match="different shapes and padding is turned off"):
            _together(batcher, [{"x": np.zeros((1, 3))}, {"x": np.zeros((1, 2))}])
    finally:
        batcher.stop()
