"""Runs SavedModel signatures the way TF Serving does, in a new interpreter that imports only tensorflow and
tensorflow_text: `tf.compat.v1.saved_model.loader.load` (restore op on variables/, init op) into a fresh graph,
then `session.run` on the SignatureDef's tensor names. Independent of savedmodels/ (it imports none of it), so
the tests compare what an export does on the server's path with the Keras model in the test's process.

    outputs = run_signatures([{"path": ..., "signature": "serving_default", "inputs": {"text": ["a", "b"]}},
                              {"path": ..., "signature": "classify", "examples": [{"text": "a"}]}])

`inputs` values are JSON (strings for string tensors); `examples` are feature dicts (strings), serialized to
tf.Examples and fed to the signature's `inputs` tensor, as TF Serving's Classify/Regress do. Each result is
{output alias: list}, strings decoded as UTF-8, with "__method_name__" the signature's method name.
"""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the model server links TF.Text's kernels)

calls = json.load(sys.stdin)
sessions, results = {}, []
for call in calls:
    if call["path"] not in sessions:
        graph = tf.Graph()
        session = tf.compat.v1.Session(graph=graph)
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], call["path"])
        sessions[call["path"]] = (session, meta_graph.signature_def)
    session, signatures = sessions[call["path"]]
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
    results.append(out)
assert not [m for m in sys.modules if m.startswith(("bert_keras", "savedmodels"))], "imported the project"
print(json.dumps(results))
"""


def run_signatures(calls: list[dict], python: str = sys.executable) -> list[dict]:
    """`python`: the interpreter (another TensorFlow + TF.Text, e.g. the 2.12 pair stock TF Serving 2.12 links)."""
    result = subprocess.run([python, "-c", SCRIPT], input=json.dumps(calls), capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
