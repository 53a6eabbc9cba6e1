"""Which TensorFlow op types a graph uses, and whether the stock TF Serving can run them.

The stock `tensorflow_model_server` links one TF.Text release: 2.12.1 in TF Serving 2.12 through 2.19, 2.20.0 in
the 2.20 line (data/README.md). A SavedModel using an op outside TF core plus that TF.Text set fails to load
there with "Op type not registered", and so does one using a TF core op newer than the TF it links (2.12.0 for
TF Serving 2.12). The op lists in data/ were read from the live registries of TF 2.12.0 and 2.20.0 and from the
TF.Text release sources.
"""

from __future__ import annotations

import os

from tensorflow.core.protobuf import saved_model_pb2

_DATA = os.path.join(os.path.dirname(__file__), "data")
# The oldest stock server our exports are checked against, and the TensorFlow and TF.Text it links.
MIN_TF_SERVING = "2.12"
TF_OF_MIN_SERVING = "2.12.0"
TF_TEXT_OF_MIN_SERVING = "2.12.1"


def _read(name: str) -> set[str]:
    with open(os.path.join(_DATA, name), encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


# Registered in TF core, but they call back into Python, which a model server does not have.
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


def serving_op_allowlist(tf_text_version: str = TF_TEXT_OF_MIN_SERVING,
                         tf_version: str = TF_OF_MIN_SERVING) -> set[str]:
    return (_read(f"tf_core_ops_v{tf_version}.txt") | _read(f"tf_text_ops_v{tf_text_version}.txt")) - PYTHON_OPS


def _graph_def_ops(graph_def) -> set[str]:
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


def function_op_types(concrete_function) -> set[str]:
    """Op types of a traced tf.function, including every function it calls."""
    return _graph_def_ops(concrete_function.graph.as_graph_def())


def preprocessing_op_types(preprocessor, num_segments: int = 1) -> set[str]:
    """Op types of `preprocessor` called on `num_segments` [None] string tensors (what an export would hold)."""
    import tensorflow as tf

    specs = [tf.TensorSpec([None], tf.string)] * num_segments
    fn = tf.function(lambda *texts: preprocessor(tuple(texts) if num_segments > 1 else texts[0]))
    return function_op_types(fn.get_concrete_function(*specs))


def saved_model_op_types(export_dir: str) -> set[str]:
    """Op types of every graph and function in a SavedModel (what the server must have registered)."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops = set()
    for meta_graph in proto.meta_graphs:
        ops |= _graph_def_ops(meta_graph.graph_def)
    return ops


def unsupported_ops(op_types: set[str], tf_text_version: str = TF_TEXT_OF_MIN_SERVING,
                    tf_version: str = TF_OF_MIN_SERVING) -> set[str]:
    """The op types a stock TF Serving linking those TF and TF.Text releases does not register (empty: it loads)."""
    # Function-call ops name the functions they call; those functions' own ops are listed separately.
    return {op for op in op_types if op not in serving_op_allowlist(tf_text_version, tf_version)
            and not op.startswith("__inference_")}
