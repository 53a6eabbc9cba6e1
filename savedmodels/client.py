"""A TF Serving client: gRPC (Predict, Classify, Regress, GetModelMetadata) and REST, written to TF Serving's
documented API (tensorflow-serving-api protos; REST `POST /v1/models/<name>:predict`)."""

from __future__ import annotations

import json
import urllib.request

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)


def make_example(features: dict) -> tf.train.Example:
    """{name: str | bytes | int | float | list of one kind} -> tf.train.Example."""
    feature = {}
    for name, value in features.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if all(isinstance(v, (str, bytes)) for v in values):
            data = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=data))
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        elif all(isinstance(v, (int, float, np.floating)) for v in values):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            raise TypeError(f"feature {name!r}: use strings, ints or floats, not {type(values[0]).__name__}")
    return tf.train.Example(features=tf.train.Features(feature=feature))


class ServingClient:
    """One model on one TF Serving address (host:port of the gRPC endpoint)."""

    def __init__(self, address: str, model_name: str, timeout: float = 30.0, version: int | None = None):
        self.address, self.model_name, self.timeout, self.version = address, model_name, timeout, version
        self.channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20),
                                                               ("grpc.max_send_message_length", 64 << 20)])
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def _spec(self, spec, signature: str):
        spec.name = self.model_name
        spec.signature_name = signature
        if self.version is not None:
            spec.version.value = self.version

    def predict(self, inputs: dict, signature: str = "serving_default", output_filter=None) -> dict:
        """{input name: array-like} -> {output name: numpy array}; strings come back as bytes."""
        request = predict_pb2.PredictRequest()
        self._spec(request.model_spec, signature)
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        request.output_filter.extend(output_filter or [])
        response = self.stub.Predict(request, timeout=self.timeout)
        return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}

    def classify(self, examples: list, signature: str = "classify") -> list[list[tuple[str, float]]]:
        """tf.Examples (or feature dicts) -> per example, [(label, score)] for every class."""
        request = classification_pb2.ClassificationRequest()
        self._spec(request.model_spec, signature)
        request.input.example_list.examples.extend(e if isinstance(e, tf.train.Example) else make_example(e)
                                                   for e in examples)
        response = self.stub.Classify(request, timeout=self.timeout)
        return [[(c.label, c.score) for c in r.classes] for r in response.result.classifications]

    def regress(self, examples: list, signature: str = "regress") -> list[float]:
        request = regression_pb2.RegressionRequest()
        self._spec(request.model_spec, signature)
        request.input.example_list.examples.extend(e if isinstance(e, tf.train.Example) else make_example(e)
                                                   for e in examples)
        return [r.value for r in self.stub.Regress(request, timeout=self.timeout).result.regressions]

    def metadata(self) -> dict:
        """{signature key: SignatureDef} of the callable signatures (the server also lists the SavedModel's internal
        `__saved_model_init_op`, which is dropped here)."""
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        self._spec(request.model_spec, "")
        request.metadata_field.append("signature_def")
        response = self.stub.GetModelMetadata(request, timeout=self.timeout)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        return {k: v for k, v in signatures.signature_def.items() if not k.startswith("__")}

    def close(self):
        self.channel.close()


def rest_predict(base_url: str, model_name: str, inputs: dict, signature: str = "serving_default",
                 timeout: float = 30.0) -> dict:
    """TF Serving's REST Predict in the columnar ("inputs") format; returns the decoded "outputs"."""
    body = json.dumps({"signature_name": signature,
                       "inputs": {k: np.asarray(v).tolist() for k, v in inputs.items()}}).encode("utf-8")
    request = urllib.request.Request(f"{base_url.rstrip('/')}/v1/models/{model_name}:predict", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())["outputs"]
