"""The gRPC client against the in-process PredictionService, over a small hand-written SavedModel.

The model's answers are plain arithmetic (checked by hand below), so these tests check the protocol: TF
Serving's request/response protos, the classify/regress method-name rule, output filters and error codes.
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf

from savedmodels.client import ServingClient, make_example
from savedmodels.local_server import start_server
from savedmodels.method_names import CLASSIFY, REGRESS, set_method_names


class _Toy(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def predict(self, text):
        length = tf.cast(tf.strings.length(text), tf.float32)
        return {"length": length, "upper": tf.strings.upper(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(self, inputs):
        x = tf.io.parse_example(inputs, {"x": tf.io.FixedLenFeature([], tf.float32)})["x"]
        scores = tf.stack([1.0 - tf.sigmoid(x), tf.sigmoid(x)], axis=1)
        classes = tf.tile(tf.constant([["negative", "positive"]]), [tf.shape(x)[0], 1])
        return {"classes": classes, "scores": scores}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress(self, inputs):
        x = tf.io.parse_example(inputs, {"x": tf.io.FixedLenFeature([], tf.float32)})["x"]
        return {"outputs": 2.0 * x + 1.0}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    base = tmp_path_factory.mktemp("models") / "toy"
    toy = _Toy()
    tf.saved_model.save(toy, str(base / "1"), signatures={"serving_default": toy.predict,
                                                          "classify": toy.classify, "regress": toy.regress,
                                                          "classify_as_predict": toy.classify})
    set_method_names(str(base / "1"), {"classify": CLASSIFY, "regress": REGRESS})
    server, port = start_server({"toy": str(base)})
    yield ServingClient(f"127.0.0.1:{port}", "toy")
    server.stop(0)


def test_predict_round_trips_strings_and_floats(client):
    out = client.predict({"text": np.array(["abc", "hello"], dtype=object)})
    np.testing.assert_array_equal(out["length"], [3.0, 5.0])
    assert out["upper"].tolist() == [b"ABC", b"HELLO"]
    assert set(client.predict({"text": np.array(["x"], dtype=object)}, output_filter=["length"])) == {"length"}


def test_classify_and_regress_take_tf_examples(client):
    result = client.classify([{"x": 0.0}, make_example({"x": 2.0})])
    assert [label for label, _ in result[0]] == ["negative", "positive"]
    np.testing.assert_allclose([s for _, s in result[0]], [0.5, 0.5], atol=1e-6)
    np.testing.assert_allclose(result[1][1][1], 1 / (1 + np.exp(-2.0)), atol=1e-6)
    np.testing.assert_allclose(client.regress([{"x": 1.5}, {"x": -1.0}]), [4.0, -1.0])


def test_classify_requires_the_classify_method_name_as_tf_serving_does(client):
    with pytest.raises(grpc.RpcError) as error:
        client.classify([{"x": 1.0}], signature="classify_as_predict")
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensorflow/serving/classify" in error.value.details()


def test_metadata_lists_signatures_with_method_names(client):
    signatures = client.metadata()
    assert signatures["classify"].method_name == CLASSIFY and signatures["regress"].method_name == REGRESS
    assert signatures["serving_default"].method_name == "tensorflow/serving/predict"
    assert set(signatures["serving_default"].inputs) == {"text"}


def test_errors_carry_grpc_codes(client):
    with pytest.raises(grpc.RpcError) as error:
        ServingClient(client.address, "nope").predict({"text": np.array(["a"], dtype=object)})
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as error:
        client.predict({"wrong": np.array(["a"], dtype=object)})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "text" in error.value.details()
    with pytest.raises(grpc.RpcError) as error:
        client.predict({"text": np.array([1.0, 2.0])})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
