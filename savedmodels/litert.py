"""`bert-keras export --format litert`: one `.tflite` that takes raw strings and answers as serving_default does.

    path = export_litert(keras.models.load_model("runs/sst2/model.keras"), "sst2.tflite", precision="int8")
    LiteRTModel(path).classify(["a gorgeous film"])          # savedmodels/litert_runner.py

The graph holds only LiteRT builtins and three TF.Text kernels with TFLite implementations (FastBertNormalize,
FastWordpieceTokenizeWithOffsets, TFText>ByteSplitWithOffsets: litert_text.TFTEXT_OPS), converted without
SELECT_TF_OPS (no Flex); the export checks the written file's op list and refuses anything else. It runs in
`ai_edge_litert.interpreter.InterpreterWithCustomOps` with `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`
(the `[litert]` extra). The tokenizer is litert_text.py: the same ids and byte offsets as BertPreprocessor.

Signature serving_default, per task kind (inputs [B] strings; multiple choice endings [B, C]):
  classification  text (or text_a, text_b) -> logits, probabilities, label_id, label (regression: logits, score)
  multiple choice context, endings -> logits, probabilities, prediction, ending
  tagging         text -> tokens, labels, start, end, token_mask, entity_start, entity_end, entity_type
                  (entity_text, a substring, has no LiteRT op: LiteRTModel cuts it from the text)
  span            question, context -> start, end (characters), score, null_score, start_logits, end_logits,
                  window_example (answer, a substring: LiteRTModel cuts it)
Outputs equal the SavedModel's (float outputs within float error). The model's kind and names travel in the
file's metadata ("bert_keras", JSON), which LiteRTModel reads.

A classifier's file also holds serving_one: the same inputs and outputs for one text (inputs [1]), traced with that
static batch and the text packed to its own length, under `layers.litert_layers(one_sequence=True)`: its encoder
has no padding to skip, so no gathers, and constant-shape reshapes, which XNNPACK takes whole (5 delegated
partitions for MiniLM against serving_default's ~30). The weights are stored once for both. LiteRTModel calls it
for a single text.

Precision: fp32; fp16 (float16 weights, computed in float32); int8 (int8 weights per channel, activations
quantized per call: "dynamic range", XNNPACK's int8 path). The tokenizer is untouched by either.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile

import tensorflow as tf

from bert_keras.atomic import atomic_file
from bert_keras.layers import litert_layers
from savedmodels.litert_text import TFTEXT_OPS, LiteRTPreprocessor
from savedmodels.precision import LITERT_PRECISIONS

PRECISIONS = LITERT_PRECISIONS
METADATA = "bert_keras"
# The converter's notice for a graph with custom ops (tensorflow/compiler/mlir/lite/flatbuffer_export.cc, a WARNING
# written from C++): "The following operation(s) need TFLite custom op implementation(s):", the ops, their details,
# "See instructions: ...". TF.Text's ops have those implementations (registered when the interpreter is made).
CUSTOM_OP_NOTICE = re.compile(r"^[^\n]*The following operation\(s\) need TFLite custom op implementation\(s\):\n"
                              r"Custom ops: (?P<ops>[^\n]*)\n(?:[^\n]*\n)*?See instructions: [^\n]*ops_custom\n?",
                              re.M)
ONE_TEXT = "serving_one"        # a classifier's one-text signature (see convert)


def _swap_preprocessor(model, preprocessor):
    previous = model.__dict__.get("preprocessor")
    object.__setattr__(model, "preprocessor", preprocessor)
    return previous


def signature(model):
    """(serving function, input specs, metadata dict) of a task model's LiteRT export."""
    from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger
    from savedmodels import litert_tasks
    model.require_preprocessor()
    pre = LiteRTPreprocessor(model.preprocessor)
    text = lambda name, rank=1: tf.TensorSpec([None] * rank, tf.string, name=name)   # noqa: E731
    if isinstance(model, BertClassifier):
        if model.multi_label:
            raise ValueError("the LiteRT export has no multi-label classifier yet: export it as a SavedModel "
                             "(bert-keras export), whose signatures carry the sigmoid scores and the chosen labels")
        meta = {"kind": "classification", "label_names": list(model.label_names), "regression": model.regression}
        if model.segments == 1:
            def serve(text):
                return model.serve(text)
            return serve, [text("text")], {**meta, "inputs": ["text"]}

        def serve_pair(text_a, text_b):
            return model.serve(text_a, text_b)
        return serve_pair, [text("text_a"), text("text_b")], {**meta, "inputs": ["text_a", "text_b"]}
    if isinstance(model, BertMultipleChoice):
        def choose(context, endings):
            return litert_tasks.choose(model, context, endings)
        return choose, [text("context"), text("endings", 2)], {"kind": "multiple_choice",
                                                               "inputs": ["context", "endings"]}
    if isinstance(model, BertTagger):
        def tag(text):
            return litert_tasks.tag(model, pre, text)
        return tag, [text("text")], {"kind": "tagging", "label_names": list(model.label_names), "inputs": ["text"]}
    if isinstance(model, BertSpanLabeler):
        def answer(question, context):
            return litert_tasks.answer(model, pre, question, context)
        return answer, [text("question"), text("context")], {"kind": "span", "inputs": ["question", "context"]}
    raise TypeError(f"cannot export {type(model).__name__}: expected a bert_keras task model "
                    "(BertClassifier, BertSpanLabeler, BertMultipleChoice, BertTagger)")


def custom_ops(flatbuffer: bytes) -> list[str]:
    """The custom op names a .tflite holds (its builtins aside)."""
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    names = set()
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        if code.CustomCode():
            names.add(code.CustomCode().decode())
    return sorted(names)


def check_ops(flatbuffer: bytes) -> None:
    """Refuses a graph that LiteRT plus TF.Text's kernels cannot run (a Flex op, an unconverted TF op)."""
    extra = [name for name in custom_ops(flatbuffer) if name not in TFTEXT_OPS]
    if extra:
        raise ValueError(f"the LiteRT graph holds ops outside LiteRT's builtins and TF.Text's TFLite kernels: "
                         f"{extra}; they would need Flex (SELECT_TF_OPS), which the interpreter cannot run")


def _with_metadata(flatbuffer: bytes, meta: dict) -> bytes:
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils
    model = flatbuffer_utils.read_model_from_bytearray(flatbuffer)
    buffer = schema.BufferT()
    buffer.data = list(json.dumps(meta).encode())
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name, entry.buffer = METADATA, len(model.buffers) - 1
    model.metadata = (model.metadata or []) + [entry]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _frozen(function, specs, key: str):
    """The function with its variables as constants, keeping its named inputs and outputs, as the signature
    `key`. (Converted with its variables, the weights stay resource variables that nothing initialises:
    READ_VARIABLE fails.)"""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    frozen = convert_variables_to_constants_v2(function)
    names = sorted(function.structured_outputs)              # the order nest.flatten gives a dict

    def named(*inputs):
        return dict(zip(names, frozen(*inputs)))
    named.__name__ = key                                     # the converter names each signature after its function
    return tf.function(named, input_signature=specs, autograph=False).get_concrete_function()


def _traced(model, serve, specs, key: str, one_sequence: bool = False):
    """`serve` traced for LiteRT with the task model's preprocessor swapped for its LiteRT form, frozen."""
    previous = _swap_preprocessor(model, LiteRTPreprocessor(model.preprocessor, one_sequence))
    try:
        with litert_layers(one_sequence):
            function = tf.function(serve, input_signature=specs, autograph=False).get_concrete_function()
    finally:
        _swap_preprocessor(model, previous)
    return _frozen(function, specs, key)


def convert(model, precision: str = "fp32") -> bytes:
    """The task model's LiteRT flatbuffer (checked: builtins and TF.Text kernels only).

    A classifier's file holds a second signature, `serving_one` (ONE_TEXT): the same outputs for a batch of one
    text (inputs [1]), traced with that static batch and the text packed to its own length, so its encoder has no
    padding, no gathers and constant reshapes: XNNPACK takes the whole encoder in a few partitions where
    serving_default's dynamic batch splits it in about thirty. LiteRTModel calls it for a single text. The two
    signatures share their weights (the converter stores equal constants once)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)} for LiteRT, got {precision!r}")
    from bert_keras.preprocessing.preprocessor import BertPreprocessor
    model.require_preprocessor()
    inner = model.preprocessor
    if not isinstance(inner, BertPreprocessor):
        raise TypeError("the model's preprocessor is not a BertPreprocessor")
    serve, specs, meta = signature(model)
    functions = [_traced(model, serve, specs, "serving_default")]
    if meta["kind"] == "classification":
        one = [tf.TensorSpec([1], spec.dtype, name=spec.name) for spec in specs]
        functions.append(_traced(model, serve, one, ONE_TEXT, one_sequence=True))
        meta = {**meta, "one_text_signature": ONE_TEXT}
    converter = tf.lite.TFLiteConverter.from_concrete_functions(functions, tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True             # TF.Text's kernels; check_ops refuses any other
    if precision != "fp32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if precision == "fp16":
            converter.target_spec.supported_types = [tf.float16]
    flatbuffer = _convert(converter)
    check_ops(flatbuffer)
    return _with_metadata(flatbuffer, {**meta, "precision": precision, "lower_case": inner.lower_case})


def tokenizer_flatbuffer(preprocessor) -> bytes:
    """A .tflite of the export's tokenizer alone, signature "tokenize": text [B] -> ids, starts, ends [N] (flat,
    byte offsets into the original text) and splits [B + 1]: what the tests hold to HF tokenizers."""
    tokenizer = LiteRTPreprocessor(preprocessor).tokenizer

    def tokenize(text):
        tokens = tokenizer.tokenize(text, offsets=True)
        return {"ids": tokens.ids, "splits": tokens.splits, "starts": tokens.starts, "ends": tokens.ends}
    specs = [tf.TensorSpec([None], tf.string, name="text")]
    function = tf.function(tokenize, input_signature=specs, autograph=False).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True
    flatbuffer = _convert(converter)
    check_ops(flatbuffer)
    return flatbuffer


def _convert(converter) -> bytes:
    """converter.convert() without the converter's notice that TF.Text's ops "need TFLite custom op
    implementation(s) ... See instructions" (they have them: TF.Text's TFLite kernels; check_ops refuses any other
    custom op). Every other line the conversion writes reaches stderr as before, after it."""
    with _stderr_filtered(without_custom_op_notice):
        return converter.convert()


def without_custom_op_notice(text: str) -> str:
    """`text` less the converter's custom-op notices that name only TF.Text's ops (TFTEXT_OPS); a notice naming
    any other op stays."""
    def keep(notice):
        ops = {name.strip() for name in notice.group("ops").split(",")}
        return "" if ops <= set(TFTEXT_OPS) else notice.group()
    return CUSTOM_OP_NOTICE.sub(keep, text)


@contextlib.contextmanager
def _stderr_filtered(keep):
    """Within: file descriptor 2 (where TensorFlow's C++ writes, and sys.stderr) goes to a temporary file; on the
    way out (an error too), `keep(what was written)` is written to stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as f:
            os.dup2(f.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                f.seek(0)
                sys.stderr.write(keep(f.read().decode("utf-8", "replace")))
                sys.stderr.flush()
    finally:
        os.close(saved)


def export_litert(model, path: str, precision: str = "fp32") -> str:
    """Writes a task model as one `.tflite` taking raw text (see the module docstring); returns `path`.

    Args:
        model: a task model with its preprocessor (BertClassifier, BertSpanLabeler, BertMultipleChoice,
            BertTagger).
        path: the file to write (written under a temporary name, then renamed).
        precision: "fp32", "fp16" (float16 weights) or "int8" (dynamic-range int8).

    Returns:
        path.

    Example:
        >>> export_litert(keras.models.load_model("runs/sst2/model.keras"), "sst2.tflite")   # doctest: +SKIP
    """
    flatbuffer = convert(model, precision)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_file(path) as tmp, open(tmp, "wb") as f:
        f.write(flatbuffer)
    return path
