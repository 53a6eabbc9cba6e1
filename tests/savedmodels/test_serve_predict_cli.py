"""`bert-keras serve` and `bert-keras predict` on bad input (issue 55), in this process through
`bert_keras_cli.main.main(argv)` against the local server on TF Serving's load path:

- serve: a port in use (a first server's, or any socket's) is refused with exit 2 and one line naming it, and no
  second server shares it (gRPC's SO_REUSEPORT is off); the same model serves on another port beside the first;
  the newest complete version is served when newer version folders are incomplete, each skipped with a line,
  and a base path with no complete version is refused with one line.
- predict: argv text that is not UTF-8, --classify with pairs, multiple choice's [batch, choices] endings (flat
  --input and --inputs-json), int ids, and inputs that do not fit the signature: answers equal to the Keras
  model's on the same text, or exit 2 with one line saying what the signature takes and what was sent.
"""

import json
import logging
import os
import shutil
import socket

import grpc
import numpy as np
import pytest
import tensorflow as tf

from savedmodels.client import ServingClient
from savedmodels.errors import PortInUse
from savedmodels.export import export_task_model
from savedmodels.local_server import start_server
from savedmodels.request_inputs import translate_error
from savedmodels.versions import incomplete
from test_bad_input import assert_one_error_line, run_main

TEXTS = ["a charming and often affecting journey .", "the plot is thin"]
LOG = "savedmodels.local_server"


@pytest.fixture(scope="module")
def served(tmp_path_factory, task_models):
    """sst2, mrpc and swag exported under one base path, served on a free port."""
    base = tmp_path_factory.mktemp("serving")
    for name in ("sst2", "mrpc", "swag"):
        export_task_model(task_models[name], str(base), name, keras_file=False)
    server, port = start_server({n: str(base / n) for n in ("sst2", "mrpc", "swag")}, poll_seconds=3600)
    yield {"base": base, "port": port, "address": f"127.0.0.1:{port}", "models": task_models,
           "pre": task_models["sst2"].preprocessor}
    server.stop()


@pytest.fixture(autouse=True)
def savedmodels_logger():
    """cmd_serve adds a stderr handler to the "savedmodels" logger; each test gets the logger back as it was."""
    logger = logging.getLogger("savedmodels")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:], logger.level = handlers, level


def predict(served, capsys, *argv, model="sst2"):
    argv = ["predict", "--server", served["address"], "--model-name", model, *argv]
    return argv, run_main(argv, capsys)


def rows(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# -- serve: the port ------------------------------------------------------------------------------------------------
def test_serve_refuses_a_port_a_first_server_holds_and_serves_beside_it_on_another(served, capsys):
    base, port = served["base"], served["port"]
    argv = ["serve", f"sst2={base / 'sst2'}", "--port", str(port)]
    code, out, err = run_main(argv, capsys)
    assert_one_error_line(code, out, err, [f"--port {port} is in use", "give another --port"], argv)
    with pytest.raises(PortInUse):                                    # the library call too
        start_server({"sst2": str(base / "sst2")}, port=port)
    # The same model on another port: both servers answer, with the same logits.
    second, other = start_server({"sst2": str(base / "sst2")})
    try:
        assert other != port
        texts = {"text": np.array(TEXTS, object)}
        answers = [ServingClient(f"127.0.0.1:{p}", "sst2").predict(texts)["logits"] for p in (port, other)]
        np.testing.assert_allclose(answers[0], answers[1], atol=0)
        want = served["models"]["sst2"](served["pre"](TEXTS)).numpy()
        np.testing.assert_allclose(answers[1], want, atol=1e-5)
    finally:
        second.stop()


def test_serve_refuses_a_port_any_socket_listens_on_and_a_port_out_of_range(served, capsys):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        argv = ["serve", str(served["base"] / "sst2"), "--port", str(port)]
        code, out, err = run_main(argv, capsys)
        assert_one_error_line(code, out, err, [f"--port {port} is in use"], argv)
    argv = ["serve", str(served["base"] / "sst2"), "--port", "70000"]
    code, out, err = run_main(argv, capsys)
    assert_one_error_line(code, out, err, ["--port 70000 is not a port"], argv)


# -- serve: incomplete versions ---------------------------------------------------------------------------------------
def test_serve_skips_incomplete_versions_and_serves_the_newest_complete(served, tmp_path, caplog, capsys):
    caplog.set_level(logging.INFO, logger=LOG)
    base = tmp_path / "sst2"
    shutil.copytree(served["base"] / "sst2" / "1", base / "1")
    (base / "2" / "variables").mkdir(parents=True)                               # an upload stopped early
    shutil.copyfile(base / "1" / "variables" / "variables.index", base / "2" / "variables" / "variables.index")
    (base / "3").mkdir()                                                         # the SavedModel, no variables/
    shutil.copyfile(base / "1" / "saved_model.pb", base / "3" / "saved_model.pb")
    assert incomplete(str(base / "1")) is None
    assert incomplete(str(base / "2")) == "no saved_model.pb"
    assert incomplete(str(base / "3")) == "no variables/ folder"
    server, port = start_server({"sst2": str(base)}, poll_seconds=3600)
    try:
        assert server.serving_version("sst2") == 1
        skipped = sorted(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())
        assert len(skipped) == 2 and "version 2 skipped: incomplete, no saved_model.pb" in skipped[0] \
            and "version 3 skipped: incomplete, no variables/ folder" in skipped[1] \
            and all("serving version 1, the newest complete one" in line for line in skipped), skipped
        want = served["models"]["sst2"](served["pre"](TEXTS)).numpy()
        out = ServingClient(f"127.0.0.1:{port}", "sst2").predict({"text": np.array(TEXTS, object)})
        np.testing.assert_allclose(out["logits"], want, atol=1e-5)
        # Polled: the incomplete ones are not logged again; a data shard missing is incomplete too (the one file
        # renamed as the first of two); a complete version 5 is served.
        shutil.copytree(base / "1", base / "4")
        [data] = (base / "4" / "variables").glob("variables.data-*")
        data.rename(data.parent / "variables.data-00000-of-00002")
        server.poll_now()
        server.poll_now()
        assert server.serving_version("sst2") == 1
        skipped = sorted(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())
        assert len(skipped) == 3, skipped
        assert "version 4 skipped: incomplete, no variables/variables.data-00001-of-00002" in skipped[2], skipped
        shutil.copytree(base / "1", tmp_path / ".5.partial")
        os.rename(tmp_path / ".5.partial", base / "5")
        server.poll_now()
        assert server.serving_version("sst2") == 5
    finally:
        server.stop()
    # No complete version: refused with one line naming what each lacks.
    for version in ("1", "4", "5"):
        shutil.rmtree(base / version)
    argv = ["serve", str(base)]
    code, out, err = run_main(argv, capsys)
    assert_one_error_line(code, out, err, ["has no complete version", "3: no variables/ folder",
                                           "2: no saved_model.pb", "bert-keras export"], argv)


# -- predict ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, name", [
    (["--input", "text={bad}"], "text"), (["--classify", "--input", "text={bad}"], "text"),
    (["--server", "{bad}", "--input", "text=a"], "--server"), (["--model-name", "{bad}", "--input", "text=a"],
                                                              "--model-name")])
def test_predict_refuses_argv_text_that_is_not_utf8_before_any_rpc(capsys, flags, name):
    """(No server at 127.0.0.1:1: the refusal comes before any RPC.)"""
    bad = os.fsdecode(b"\xff\xfe bad")                   # what Python makes of such argv bytes
    argv = ["predict", "--server", "127.0.0.1:1", "--model-name", "sst2", *(f.format(bad=bad) for f in flags)]
    code, out, err = run_main(argv, capsys)
    assert_one_error_line(code, out, err, [f"{name}: the text is not UTF-8", "byte 0xff at character 0"], argv)


def test_predict_classify_sends_pairs_as_one_example_a_row(served, capsys):
    model, pre = served["models"]["mrpc"], served["pre"]
    a, b = TEXTS, TEXTS[::-1]
    argv, (code, out, err) = predict(served, capsys, "--classify", "--input", f"text_a={a[0]}", "--input",
                                     f"text_b={b[0]}", "--input", f"text_a={a[1]}", "--input", f"text_b={b[1]}",
                                     model="mrpc")
    assert code == 0, err
    got = rows(out)
    want = tf.nn.softmax(model(pre((tf.constant(a), tf.constant(b))))).numpy()
    assert [g["input"] for g in got] == [{"text_a": x, "text_b": y} for x, y in zip(a, b)]
    np.testing.assert_allclose([[g["classes"][c] for c in ("0", "1")] for g in got], want, atol=1e-4)
    # Unequal counts: refused, not an IndexError.
    argv, (code, out, err) = predict(served, capsys, "--classify", "--input", f"text_a={a[0]}", "--input",
                                     f"text_a={a[1]}", "--input", f"text_b={b[0]}", model="mrpc")
    assert_one_error_line(code, out, err, ["--classify", "text_a [2], text_b [1]"], argv)


def test_predict_sends_multiple_choice_rows(served, capsys):
    model, pre = served["models"]["swag"], served["pre"]
    contexts, endings = ["A man sits at a piano.", "She opens the door."], [["He plays.", "He eats it."],
                                                                          ["She walks in.", "It sings."]]
    logits = model(pre((tf.constant([[c] * 2 for c in contexts]), tf.constant(endings)))).numpy()
    # One example's choices as repeated --input.
    argv, (code, out, err) = predict(served, capsys, "--input", f"context={contexts[0]}", "--input",
                                     f"endings={endings[0][0]}", "--input", f"endings={endings[0][1]}", model="swag")
    assert code == 0, err
    [got] = rows(out)
    np.testing.assert_allclose(got["logits"], logits[:1], atol=1e-5)
    assert got["prediction"] == logits[:1].argmax(-1).tolist()
    # A batch of them as JSON.
    argv, (code, out, err) = predict(served, capsys, "--inputs-json",
                                     json.dumps({"context": contexts, "endings": endings}), model="swag")
    assert code == 0, err
    np.testing.assert_allclose(rows(out)[0]["logits"], logits, atol=1e-5)
    # Two contexts with flat endings cannot say which ending is whose: refused, pointing at --inputs-json.
    argv, (code, out, err) = predict(served, capsys, *(f"--input=context={c}" for c in contexts),
                                     *(f"--input=endings={e}" for e in endings[0]), model="swag")
    assert_one_error_line(code, out, err, ["batch sizes differ", "context 2", "endings 1", "--inputs-json"], argv)
    # Rows of different lengths.
    argv, (code, out, err) = predict(served, capsys, "--inputs-json", json.dumps(
        {"context": contexts, "endings": [["a", "b"], ["c"]]}), model="swag")
    assert_one_error_line(code, out, err, ["endings: its rows differ in length (1, 2)"], argv)


def test_predict_sends_int_ids_from_json(served, capsys):
    ids = {"input_word_ids": [[101, 2204, 2143, 102]], "input_mask": [[1, 1, 1, 1]], "input_type_ids": [[0] * 4]}
    argv, (code, out, err) = predict(served, capsys, "--signature", "from_ids", "--inputs-json", json.dumps(ids))
    assert code == 0, err
    want = served["models"]["sst2"]({k: np.array(v, "int32") for k, v in ids.items()}).numpy()
    np.testing.assert_allclose(rows(out)[0]["logits"], want, atol=1e-5)
    argv, (code, out, err) = predict(served, capsys, "--signature", "from_ids", "--input", "input_word_ids=101")
    assert_one_error_line(code, out, err, ["signature from_ids takes", "input_word_ids (int32 [batch, any])",
                                           "missing input_mask, input_type_ids"], argv)


@pytest.mark.parametrize("flags, names", [
    (["--input", "txt=hello"], ["signature serving_default takes text (string [batch])", "sent txt",
                                "missing text", "txt not in it"]),
    (["--inputs-json", '{"text": [[1, 2]]}'], ["text takes text; got int"]),
    (["--inputs-json", '{"text": [["a", "b"]]}'], ["text takes string [batch]; sent text (string [1, 2])"]),
    (["--inputs-json", "[1"], ["--inputs-json:"]),
    (["--inputs-json", "[]"], ["--inputs-json: give a JSON object"]),
    (["--signature", "nope", "--input", "text=a"], ["has no signature nope", "classify or from_ids or "
                                                                             "serving_default"]),
    (["--input", "novalue"], ["write NAME=TEXT"]),
])
def test_predict_refuses_inputs_that_do_not_fit_the_signature(served, capsys, flags, names):
    argv, (code, out, err) = predict(served, capsys, *flags)
    assert_one_error_line(code, out, err, names, argv)


def test_the_servers_input_size_message_becomes_what_the_signature_takes(served):
    """TF Serving's own wording (the local server answers with it), translated with and without the metadata."""
    sent = {"txt": np.array([b"hello"], object)}
    client = ServingClient(served["address"], "sst2")
    with pytest.raises(grpc.RpcError) as e:
        client.predict(sent)
    assert e.value.details().startswith("input size does not match signature: 1!=1")
    assert translate_error(e.value.details(), "serving_default", sent) == \
        "signature serving_default takes text; sent txt (string [1])"
    assert translate_error(e.value.details(), "serving_default", sent, client.metadata()["serving_default"]) == \
        "signature serving_default takes text (string [batch]); sent txt (string [1])"
