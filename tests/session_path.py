"""Runs SavedModel signatures the way TF Serving does, in a new interpreter that imports only tensorflow and
tensorflow_text: `tf.compat.v1.saved_model.loader.load` (restore op on variables/, init op) into a fresh graph,
then `session.run` on the SignatureDef's tensor names. Independent of savedmodels/ (it imports none of it), so
the tests compare what an export does on the server's path with the Keras model in the test's process.

    outputs = run_signatures([{"path": ..., "signature": "serving_default", "inputs": {"text": ["a", "b"]}},
                              {"path": ..., "signature": "classify", "examples": [{"text": "a"}]}])

`inputs` values are JSON (strings for string tensors); `examples` are feature dicts (strings), serialized to
tf.Examples and fed to the signature's `inputs` tensor, as TF Serving's Classify/Regress do. Each result is
{output alias: list}, strings decoded as UTF-8, with "__method_name__" the signature's method name.

`count_compiles=True` has XLA dump every module it compiles (XLA_FLAGS=--xla_dump_to) and adds to each result
"__xla_compiles__", the number of XLA compilations in that process so far, and "__xla_shapes__", the distinct
int32 [rows, length] argument shapes (the id tensors) of those compilations, sorted. A call may carry
"warmup": true instead of a signature: it replays the version's assets.extra/tf_serving_warmup_requests (Predict
records: inputs into the named signature) as TF Serving does at load, and returns {"__records__": count}.
"""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the model server links TF.Text's kernels)

calls = json.load(sys.stdin)
sessions, results = {}, []
dump = os.environ.get("SESSION_PATH_XLA_DUMP")

def modules():
    return [os.path.join(dump, n) for n in os.listdir(dump) if n.endswith(".before_optimizations.txt")] \
        if os.path.isdir(dump) else []

def compiled():
    import re
    shapes = set()
    for path in modules():
        with open(path) as f:
            header = f.readline()
        layout = header.split("entry_computation_layout={(", 1)[1].split(")->", 1)[0]
        shapes.update((int(a), int(b)) for a, b in re.findall(r"s32\[(\d+),(\d+)\]", layout))
    return {"__xla_compiles__": len(modules()), "__xla_shapes__": sorted(shapes)}

for call in calls:
    if call["path"] not in sessions:
        graph = tf.Graph()
        session = tf.compat.v1.Session(graph=graph)
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], call["path"])
        sessions[call["path"]] = (session, meta_graph.signature_def)
    session, signatures = sessions[call["path"]]
    if call.get("warmup"):
        from tensorflow_serving.apis import prediction_log_pb2
        records = 0
        for record in tf.data.TFRecordDataset(os.path.join(call["path"], "assets.extra", "tf_serving_warmup_requests")):
            request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
            signature = signatures[request.model_spec.signature_name or "serving_default"]
            session.run({k: v.name for k, v in signature.outputs.items()},
                        {signature.inputs[k].name: tf.make_ndarray(v) for k, v in request.inputs.items()})
            records += 1
        results.append({"__records__": records, **(compiled() if dump else {})})
        continue
    signature = signatures[call["signature"]]
    feeds = {}
    for alias, value in call.get("inputs", {}).items():
        info = signature.inputs[alias]
        feeds[info.name] = np.array(value, dtype=object if info.dtype == tf.string.as_datatype_enum
                                    else tf.dtypes.as_dtype(info.dtype).as_numpy_dtype)
    if "examples" in call:
        serialized = [tf.train.Example(features=tf.train.Features(feature={
            k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8")]))
            for k, v in example.items()})).SerializeToString() for example in call["examples"]]
        feeds[signature.inputs["inputs"].name] = np.array(serialized, dtype=object)
    fetched = session.run({k: v.name for k, v in signature.outputs.items()}, feeds)
    out = {k: (np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(v).tolist()
               if v.dtype == object else v.tolist()) for k, v in fetched.items()}
    out["__method_name__"] = signature.method_name
    if dump:
        out.update(compiled())
    results.append(out)
assert not [m for m in sys.modules if m.startswith(("bert_keras", "savedmodels"))], "imported the project"
print(json.dumps(results))
"""


def run_signatures(calls: list[dict], python: str = sys.executable, count_compiles: bool = False) -> list[dict]:
    """`python`: the interpreter (another TensorFlow + TF.Text, e.g. the 2.12 pair stock TF Serving 2.12 links)."""
    import tempfile
    with tempfile.TemporaryDirectory() as dump:
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        if count_compiles:
            env.update(SESSION_PATH_XLA_DUMP=dump, XLA_FLAGS=f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}")
        result = subprocess.run([python, "-c", SCRIPT], input=json.dumps(calls), capture_output=True, text=True,
                                env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
