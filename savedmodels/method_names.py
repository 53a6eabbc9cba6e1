"""Marking signatures for TF Serving's Classify and Regress APIs.

TF2's `tf.saved_model.save` gives every signature the method name `tensorflow/serving/predict`, and TF Serving's
Classify/Regress handlers refuse any signature whose method_name is not `tensorflow/serving/classify` /
`.../regress` (tensorflow/serving#1512, tensorflow/tensorflow#34968). The SavedModel protocol buffer keeps the
method name as plain data, so after saving we rewrite it in saved_model.pb (atomically).
"""

from __future__ import annotations

import os

from tensorflow.core.protobuf import saved_model_pb2

from bert_keras.atomic import atomic_file

PREDICT = "tensorflow/serving/predict"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"


def set_method_names(export_dir: str, methods: dict[str, str]) -> None:
    """Sets {signature key: method name} in export_dir/saved_model.pb; an unknown key is an error."""
    path = os.path.join(export_dir, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    for meta_graph in proto.meta_graphs:
        for key, method in methods.items():
            if key not in meta_graph.signature_def:
                raise KeyError(f"{export_dir} has no signature {key!r} (it has {sorted(meta_graph.signature_def)}).")
            meta_graph.signature_def[key].method_name = method
    with atomic_file(path) as tmp, open(tmp, "wb") as f:
        f.write(proto.SerializeToString())
