"""One model version loaded the way TF Serving loads it, and its Predict, Classify and Regress on that path.

TF Serving's `LoadSavedModel` (SavedModelBundle) imports the MetaGraph tagged "serve" into a new graph, runs the
saver's restore op on `variables/`, runs the init op, and answers each request with `Session::Run` on the
SignatureDef's tensor names. Here: a `tf.compat.v1.Session` over its own `tf.Graph`,
`tf.compat.v1.saved_model.loader.load` (the same three steps) and `session.run`. Nothing is restored by object
graph (`tf.saved_model.load`), so an export whose checkpoint does not fill the variables its signatures read fails
here as it fails in the server. TF.Text must be imported first: the server links its kernels.

Request handling follows tensorflow_serving/servables/tensorflow/{predict_util,classifier,regressor}.cc, with
their status codes and wording: an unknown signature key is FAILED_PRECONDITION for Predict and INVALID_ARGUMENT
for Classify/Regress; input keys must match the signature's; Classify/Regress need the classify/regress
method_name and feed the request's serialized tf.Examples to the signature's one `inputs` tensor. Input dtypes
and shapes are checked against the SignatureDef before the run, so a wrong one is an INVALID_ARGUMENT naming
the input rather than an error from inside the graph.

    bundle = SessionBundle("serving/sst2/3")        # raises LoadError (with the reason) if it cannot load
    response = bundle.predict(predict_request)      # raises ServingError(code, message)
    bundle.warmup()                                 # replays assets.extra/tf_serving_warmup_requests

An XLA export (savedmodels/xla.py: functions marked `_XlaMustCompile`) loads only with
`xla_cpu_compilation_enabled=True`, as tensorflow_model_server runs one only with --xla_cpu_compilation_enabled=true
(without it the server calls tensorflow::DisableXlaCompilation() and the first compilation, a warm-up request's,
fails with "XLA compilation disabled"). Enabled, nothing else is needed: TensorFlow's Session runs a
jit_compile function through XLA:CPU, compiled once per input shape.
"""

from __future__ import annotations

import os

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers TF.Text's kernels, as the model server links them)
from tensorflow.python.util import deprecation
from tensorflow_serving.apis import classification_pb2, predict_pb2, prediction_log_pb2, regression_pb2

from savedmodels.errors import LoadError, ServingError

PREDICT = "tensorflow/serving/predict"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_WARMUP_RECORDS = 1000                                     # WarmupConsts::kMaxNumRecords
_GRPC_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _is_text(value) -> bool:
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return isinstance(value, (str, bytes))


def _first_line(error: Exception) -> str:
    """The line of a TensorFlow error that says what went wrong (not "Graph execution error:" or node names)."""
    text = getattr(error, "message", None) or str(error)
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and line.strip() not in ("Graph execution error:", "Detected at node:")]
    return (lines[0] if lines else type(error).__name__)[:2000]


class SessionBundle:
    """A SavedModel version in its own graph and session; thread-safe (Session.run is)."""

    def __init__(self, path: str, session_config: tf.compat.v1.ConfigProto | None = None, batching=None,
                 xla_cpu_compilation_enabled: bool = False):
        """`batching`: a batching.BatchingParameters to batch concurrent requests server-side (None: each request
        runs on its own, TF Serving's default). `xla_cpu_compilation_enabled`: serve XLA exports (else they are
        refused with LoadError, as the model server without --xla_cpu_compilation_enabled=true refuses them)."""
        self.path = path
        if not xla_cpu_compilation_enabled:
            from savedmodels.xla import must_compile_functions, refusal
            from google.protobuf.message import DecodeError
            try:
                compiled = must_compile_functions(path)
            except OSError:
                compiled = []                     # no saved_model.pb: the loader below says so
            except DecodeError as e:              # cut short or damaged
                raise LoadError(f"{path}/saved_model.pb cannot be read ({_first_line(e)}): the export is damaged or "
                                "cut short; export it again") from None
            if compiled:
                raise LoadError(refusal(path, compiled))
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph, config=session_config)
        try:
            with deprecation.silence():       # "use tf.saved_model.load": the very path TF Serving does not take
                meta_graph = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], path)
        except Exception as e:            # noqa: BLE001  (any failure: a corrupt checkpoint, a missing op, ...)
            self.session.close()
            raise LoadError(f"loading {path} on the SavedModelBundle path failed: {_first_line(e)}") from e
        self.signature_defs = meta_graph.signature_def
        self.batcher = None
        if batching is not None:
            from savedmodels.batching import Batcher
            self.batcher = Batcher(self._session_run, batching)

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.stop()
        self.session.close()

    # -- running a signature ---------------------------------------------------------------------------------
    def run(self, signature_name: str, inputs: dict, aliases: list[str] | None = None) -> dict[str, np.ndarray]:
        """Session.run on a signature's tensors: {input alias: array-like} -> {output alias: value} (all outputs,
        or `aliases`). Strings come back as bytes."""
        signature = self.signature_defs[signature_name]
        aliases = list(signature.outputs) if aliases is None else aliases
        inputs = {k: v if isinstance(v, np.ndarray) else np.array(v, dtype=object if _is_text(v) else None)
                  for k, v in inputs.items()}
        for alias, value in inputs.items():
            info = signature.inputs[alias]
            want = tf.dtypes.as_dtype(info.dtype)
            given = tf.string if value.dtype.kind in "OSU" else tf.dtypes.as_dtype(value.dtype)
            if given != want:
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"input '{alias}' expects {want.name} but {given.name} is provided")
            shape = tf.TensorShape(info.tensor_shape) if not info.tensor_shape.unknown_rank else None
            if shape is not None and not shape.is_compatible_with(value.shape):
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"input '{alias}' has shape {list(value.shape)}; the signature takes "
                                   f"{shape.as_list()} (None: any size)")
        if self.batcher is not None:
            outputs = self.batcher.run(signature_name, inputs)
            return {alias: outputs[alias] for alias in aliases}
        return self._session_run(signature_name, inputs, aliases)

    def _session_run(self, signature_name: str, inputs: dict, aliases: list[str] | None = None) -> dict:
        signature = self.signature_defs[signature_name]
        feeds = {signature.inputs[alias].name: value for alias, value in inputs.items()}
        fetches = {alias: signature.outputs[alias].name for alias in (aliases or list(signature.outputs))}
        try:
            return self.session.run(fetches, feeds)
        except tf.errors.OpError as e:
            raise ServingError(_GRPC_CODES.get(e.error_code, grpc.StatusCode.UNKNOWN), _first_line(e)) from e

    # -- Predict -----------------------------------------------------------------------------------------------
    def predict(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        name = request.model_spec.signature_name or "serving_default"
        if name not in self.signature_defs:
            raise ServingError(grpc.StatusCode.FAILED_PRECONDITION, f'Serving signature key "{name}" not found.')
        signature = self.signature_defs[name]
        given, expected = set(request.inputs), set(signature.inputs)
        if given != expected:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"input size does not match signature: {len(given)}!={len(expected)} "
                               f"len({{{','.join(sorted(given))}}}) != len({{{','.join(sorted(expected))}}}). "
                               f"Sent extra: {{{','.join(sorted(given - expected))}}}. "
                               f"Missing but required: {{{','.join(sorted(expected - given))}}}.")
        aliases = list(request.output_filter) or list(signature.outputs)
        for alias in aliases:
            if alias not in signature.outputs:
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"output tensor alias not found in signature: {alias} Outputs expected to be "
                                   f"in the set {{{','.join(sorted(signature.outputs))}}}.")
        if len(set(aliases)) != len(aliases):
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "duplicate output tensor alias in output_filter")
        try:
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        except (TypeError, ValueError) as e:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"cannot read the input tensors: {e}") from e
        outputs = self.run(name, inputs, aliases)
        response = predict_pb2.PredictResponse()
        for alias in aliases:
            response.outputs[alias].CopyFrom(tf.make_tensor_proto(outputs[alias]))
        return response

    # -- Classify and Regress: serialized tf.Examples into the signature's `inputs` ------------------------------
    def _example_signature(self, request, method: str) -> str:
        name = request.model_spec.signature_name or "serving_default"
        if name not in self.signature_defs:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"No signature was found with the name: {name}")
        signature = self.signature_defs[name]
        kind = method.rsplit("/", 1)[1]
        if signature.method_name != method:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"Expected {kind} signature method_name to be "
                               f"{method}. Was: {signature.method_name}")
        if list(signature.inputs) != ["inputs"]:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "Expected one input Tensor named 'inputs'.")
        return name

    @staticmethod
    def _serialized_examples(request) -> np.ndarray:
        kind = request.input.WhichOneof("kind")
        if kind == "example_list":
            examples = list(request.input.example_list.examples)
        elif kind == "example_list_with_context":
            context = request.input.example_list_with_context.context
            examples = []
            for e in request.input.example_list_with_context.examples:
                merged = tf.train.Example()
                merged.CopyFrom(context)
                merged.MergeFrom(e)
                examples.append(merged)
        else:
            examples = []
        if not examples:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")
        return np.array([e.SerializeToString() for e in examples], dtype=object)

    def classify(self, request) -> classification_pb2.ClassificationResponse:
        name = self._example_signature(request, CLASSIFY)
        aliases = [a for a in ("classes", "scores") if a in self.signature_defs[name].outputs]
        if not aliases:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, 'Expected classification signature outputs '
                               'to contain at least one of "classes" or "scores".')
        examples = self._serialized_examples(request)
        outputs = self.run(name, {"inputs": examples}, aliases)
        classes, scores = outputs.get("classes"), outputs.get("scores")
        for name, value in outputs.items():
            if value.ndim != 2 or value.shape[0] != len(examples):
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"Expected {name} output of shape "
                                   f"[{len(examples)}, classes]. Got: {list(value.shape)}")
        response = classification_pb2.ClassificationResponse()
        for i in range(len(examples)):
            result = response.result.classifications.add()
            for j in range((scores if scores is not None else classes).shape[1]):
                c = result.classes.add()
                if classes is not None:
                    c.label = classes[i, j].decode("utf-8", "replace")
                if scores is not None:
                    c.score = float(scores[i, j])
        return response

    def regress(self, request) -> regression_pb2.RegressionResponse:
        name = self._example_signature(request, REGRESS)
        if list(self.signature_defs[name].outputs) != ["outputs"]:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "Expected one output Tensor named 'outputs'.")
        examples = self._serialized_examples(request)
        values = self.run(name, {"inputs": examples}, ["outputs"])["outputs"]
        if values.size != len(examples):
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"Expected output batch size to be "
                               f"{len(examples)}. Got: {list(values.shape)}")
        response = regression_pb2.RegressionResponse()
        for value in values.reshape(-1):
            response.result.regressions.add().value = float(value)
        return response

    # -- warmup ------------------------------------------------------------------------------------------------
    def warmup(self) -> int:
        """Replays assets.extra/tf_serving_warmup_requests (PredictionLog records) as TF Serving does at load;
        returns how many ran. A failing, unreadable or unsupported record raises LoadError naming it."""
        path = os.path.join(self.path, WARMUP_FILE)
        if not tf.io.gfile.exists(path):                 # (a version on a bucket too, as the server reads it)
            return 0
        count = 0
        try:
            records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
        except Exception as e:            # noqa: BLE001
            raise LoadError(f"the warmup file {path} is not a readable TFRecord file: {_first_line(e)}") from e
        if len(records) > MAX_WARMUP_RECORDS:
            raise LoadError(f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}")
        for count, record in enumerate(records, 1):
            log = prediction_log_pb2.PredictionLog()
            try:
                log.ParseFromString(record)
            except Exception as e:        # noqa: BLE001
                raise LoadError(f"Failed to parse warmup record {count} from {path}") from e
            kind = log.WhichOneof("log_type")
            run = {"predict_log": self.predict, "classify_log": self.classify, "regress_log": self.regress}.get(kind)
            if run is None:
                raise LoadError(f"warmup record {count} of {path}: log type {kind} is not supported here "
                                "(predict_log, classify_log, regress_log)")
            request = getattr(log, kind).request
            try:
                run(request)
            except ServingError as e:
                raise LoadError(f"warmup request {count} of {len(records)} ({kind}, signature "
                                f"'{request.model_spec.signature_name or 'serving_default'}') failed: "
                                f"{e.code.name}: {e.message}") from e
        return count
