"""How every SavedModel of the project is written: the task exports (export.py), the TF Hub-style pair (hub.py).

    save_servable(target, signatures, attributes=None, finish=None)

One rule makes the result load the way TF Serving loads it. TF Serving does not call `tf.saved_model.load`: its
C++ `LoadSavedModel` imports the MetaGraph, runs the saver's restore op on `variables/` (each checkpoint key into
the variable node the SavedModel's graph names for it), runs the init op, then `Session::Run`s the SignatureDef's
tensors. So the variables the checkpoint restores must be the very handles the signature functions read.

They are not when the saved object holds a Keras 3 model (or a tf.Module/AutoTrackable holding one): the object
graph then tracks `keras.Variable`s, and a keras.Variable exports itself as a *second* tf.Variable initialised
from the first (`object_map[self] = tf.Variable(object_map[self.value])`, keras/src/backend/tensorflow/core.py).
The checkpoint restores that copy ("Variable", "Variable_1", ...); the functions read the original, which nothing
restores: "FAILED_PRECONDITION: Could not find variable transformer_layer_0/..." on the first request
(tensorflow/serving#2226, keras-team/keras#20095, #19274). `tf.saved_model.load` restores by object graph and
hides it. Holding the model also saved its optimizer: AdamW's two slots per weight, three times the bytes.

So the root saved here holds no Keras object: the signature functions, any extra attributes (tf.functions, the
TF Hub API's variable lists) and `_captured_variables`, exactly the tf.Variables those functions read (the
keras.Variables' `.value`s, deduplicated). Nothing else is saved: no optimizer slots, step counters or metrics.
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_keras.atomic import atomic_directory
from savedmodels.ops import MIN_TF_SERVING, saved_model_op_types, unsupported_ops


def concrete_functions(function) -> list:
    """The traced graphs of a tf.function (every trace so far) or of a concrete function."""
    if isinstance(function, tf.types.experimental.ConcreteFunction):
        return [function]
    if isinstance(function, tf.types.experimental.PolymorphicFunction):
        return list(function._list_all_concrete_functions())        # what tf.saved_model.save serializes
    return []


def captured_variables(functions) -> list[tf.Variable]:
    """The tf.Variables the functions read, each once, in first-read order (a function's graph watches every
    variable it or a function it calls reads)."""
    seen, out = set(), []
    for function in functions:
        for concrete in concrete_functions(function):
            for v in concrete.variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
    return out


def as_tf_variables(values) -> list:
    """keras.Variables -> the tf.Variables that hold their values; anything else as it is."""
    import keras
    return [v.value if isinstance(v, keras.Variable) else v for v in values]


def servable_root(signatures: dict, attributes: dict | None = None):
    """The object to save: the functions and the variables they read, no Keras object (see the module doc)."""
    root = tf.__internal__.tracking.AutoTrackable()
    attributes = dict(attributes or {})
    for name, value in attributes.items():
        if isinstance(value, (list, tuple)):
            value = as_tf_variables(value)
        setattr(root, name, value)
    root._captured_variables = captured_variables(list(signatures.values()) + list(attributes.values()))
    return root


def save_servable(target: str, signatures: dict, attributes: dict | None = None, finish=None) -> None:
    """tf.saved_model.save of servable_root(...) under a temporary name beside `target`, `finish(folder)` for
    extra files, the op check, then a rename into place; on any error nothing is left behind."""
    root = servable_root(signatures, attributes)
    with atomic_directory(target, last=("saved_model.pb",)) as tmp:
        tf.saved_model.save(root, tmp, signatures=signatures)
        if finish:
            finish(tmp)
        bad = unsupported_ops(saved_model_op_types(tmp))
        if bad:
            raise RuntimeError(f"{os.path.basename(target)}: the export uses op types the stock TF Serving "
                               f"{MIN_TF_SERVING} does not register: {sorted(bad)}. Use only ops listed in "
                               "savedmodels/data/ (TF core, TF.Text of that release), or serve with a model server "
                               "that links them")
