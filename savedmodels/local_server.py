"""An in-process TF Serving PredictionService over exported SavedModels, for tests and the demo.

The stock `tensorflow_model_server` cannot be installed on these machines, so this server implements the same
gRPC protocol (tensorflow-serving-api's protos) with TF Serving's documented semantics, over the same
`<model_base_path>/<version>/` layout, so the client and the exports are exercised end to end:
  Predict           any signature; inputs by name as TensorProtos; `output_filter` honoured.
  Classify/Regress  only signatures whose method_name is tensorflow/serving/classify (regress); the request's
                    tf.Examples are serialized into the signature's `inputs` string tensor; classify returns
                    `classes`/`scores`, regress `outputs`.
  GetModelMetadata  `signature_def` metadata (a SignatureDefMap).
Errors are gRPC INVALID_ARGUMENT / NOT_FOUND / FAILED_PRECONDITION with TF Serving's wording where it matters.
It is not a production server: one process, the newest version of each model, no batching.
"""

from __future__ import annotations

import concurrent.futures
import os

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)

CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"


class _Servable:
    """The newest numeric version under a model's base path, loaded once."""

    def __init__(self, name: str, base_path: str):
        versions = [int(v) for v in os.listdir(base_path) if v.isdigit()]
        if not versions:
            raise FileNotFoundError(f"{base_path} has no numeric version folder (expected {base_path}/1/...).")
        self.name, self.version = name, max(versions)
        path = os.path.join(base_path, str(self.version))
        self.model = tf.saved_model.load(path)
        proto = saved_model_pb2.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            proto.ParseFromString(f.read())
        self.signature_defs = proto.meta_graphs[0].signature_def

    def call(self, signature_name: str, inputs: dict) -> dict:
        function = self.model.signatures[signature_name]
        return {k: v.numpy() for k, v in function(**inputs).items()}


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, models: dict[str, str]):
        self.servables = {name: _Servable(name, path) for name, path in models.items()}

    # -- helpers -----------------------------------------------------------------------------------------
    def _servable(self, model_spec, context):
        servable = self.servables.get(model_spec.name)
        if servable is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: Latest({model_spec.name})")
        if model_spec.HasField("version") and model_spec.version.value != servable.version:
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"Servable not found for request: Specific({model_spec.name}, {model_spec.version.value})")
        return servable

    def _signature(self, servable, model_spec, context, method=None):
        name = model_spec.signature_name or "serving_default"
        if name not in servable.signature_defs:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"Serving signature key \"{name}\" not found.")
        if method and servable.signature_defs[name].method_name != method:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"Expected {method.rsplit('/', 1)[1]} signature method_name to be {method}. Was: "
                          f"{servable.signature_defs[name].method_name}")
        return name

    def _run(self, servable, signature, inputs, context):
        try:
            return servable.call(signature, inputs)
        except (tf.errors.InvalidArgumentError, TypeError, ValueError) as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e).strip().splitlines()[0][:2000])

    def _model_spec(self, response, servable, signature):
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = signature

    # -- the RPCs ----------------------------------------------------------------------------------------
    def Predict(self, request, context):
        servable = self._servable(request.model_spec, context)
        signature = self._signature(servable, request.model_spec, context)
        expected = set(servable.signature_defs[signature].inputs)
        given = set(request.inputs)
        if given != expected:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"input keys {sorted(given)} do not match the signature's {sorted(expected)}")
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        outputs = self._run(servable, signature, inputs, context)
        wanted = list(request.output_filter) or list(outputs)
        unknown = [k for k in wanted if k not in outputs]
        if unknown:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"output tensor alias not found in signature: {unknown}")
        response = predict_pb2.PredictResponse()
        self._model_spec(response, servable, signature)
        for key in wanted:
            response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
        return response

    def _examples(self, request, context) -> np.ndarray:
        kind = request.input.WhichOneof("kind")
        if kind != "example_list":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "only Input.example_list is supported by this server")
        examples = request.input.example_list.examples
        if not examples:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")
        return np.array([e.SerializeToString() for e in examples], dtype=object)

    def _run_on_examples(self, request, context, method, response):
        """Classify/Regress: the signature must carry `method`; the examples go in as its `inputs` tensor."""
        servable = self._servable(request.model_spec, context)
        signature = self._signature(servable, request.model_spec, context, method)
        outputs = self._run(servable, signature, {"inputs": self._examples(request, context)}, context)
        self._model_spec(response, servable, signature)
        return outputs

    def Classify(self, request, context):
        response = classification_pb2.ClassificationResponse()
        outputs = self._run_on_examples(request, context, CLASSIFY, response)
        scores, classes = outputs.get("scores"), outputs.get("classes")
        rows = len(scores) if scores is not None else len(classes)
        for i in range(rows):
            result = response.result.classifications.add()
            width = scores.shape[1] if scores is not None else classes.shape[1]
            for j in range(width):
                c = result.classes.add()
                if classes is not None:
                    c.label = classes[i, j].decode("utf-8") if isinstance(classes[i, j], bytes) else str(classes[i, j])
                if scores is not None:
                    c.score = float(scores[i, j])
        return response

    def Regress(self, request, context):
        response = regression_pb2.RegressionResponse()
        outputs = self._run_on_examples(request, context, REGRESS, response)
        for value in np.asarray(outputs["outputs"]).reshape(-1):
            response.result.regressions.add().value = float(value)
        return response

    def GetModelMetadata(self, request, context):
        servable = self._servable(request.model_spec, context)
        if list(request.metadata_field) != ["signature_def"]:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Metadata field signature_def is the only one supported")
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        signatures = get_model_metadata_pb2.SignatureDefMap()
        for key, value in servable.signature_defs.items():
            signatures.signature_def[key].CopyFrom(value)
        response.metadata["signature_def"].Pack(signatures)
        return response


def start_server(models: dict[str, str], port: int = 0, workers: int = 8):
    """Serves {model name: base path} on 127.0.0.1; returns (grpc server, bound port). Stop with server.stop(0)."""
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=workers))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(models), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound
