"""The opt-in XLA export (`bert-keras export --xla`): the encoder and head of every signature in one
`jit_compile=True` function, called on a few padded shapes only.

TF.Text's ops have no XLA kernels ("unsupported operations on XLA_CPU_JIT"), so the tokenizer and packer stay
outside, in the signature's plain graph, and only the id batch enters the compiled function. XLA compiles once
per input shape, so the ids are padded to a handful of shapes first:

  length   the packed length (the batch's longest, rounded up to 8) padded up to the next length bucket, by
           default 16, 32, 64, 128 and the preprocessor's max_seq_length (only those up to it);
  batch    the rows padded up to the next of `batch_sizes` (TF Serving's `allowed_batch_sizes`, default 1, 2, 4,
           8, 16, 32); a larger batch (a SQuAD request's windows, N contexts x C endings) runs in chunks of the
           largest size.

Padded rows and positions are masked (input_mask 0) and cut from the outputs, so answers are those of the
default export (within float rounding). Multiple-choice ids [B, C, S] are folded to [B*C, S] rows first, so the
number of endings adds no shapes. Every signature calls the same compiled function (one input signature), so
they share its compilations. `warmup_inputs` gives one serving_default request per (length bucket, batch size):
TF Serving replays them at load, and after that no request inside the buckets compiles. `warmup_max_length`
caps the warm-up (e.g. 128 for a model packing up to 512 that serves sentences): the buckets above it still
answer, compiling each (bucket, batch size) on its first request.

TF Serving runs such a model only when started with `--xla_cpu_compilation_enabled=true`; without it the server
calls `tensorflow::DisableXlaCompilation()` and the first compilation, the first warm-up request, fails with
"XLA compilation disabled", so the version does not load. A SavedModel marks the compiled function with the
attribute `_XlaMustCompile` (on the function and on the PartitionedCall that calls it): `must_compile_functions`
finds it, and the local server refuses such a version unless started with the same flag.

    with compiled_inference(model, XlaShapes.for_model(model)):
        ...trace the signatures...           # model.inference is the bucketed, compiled call meanwhile
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

import tensorflow as tf

from bert_keras.encoder import INPUT_NAMES

LENGTH_BUCKETS = (16, 32, 64, 128)
BATCH_SIZES = (1, 2, 4, 8, 16, 32)
MUST_COMPILE = "_XlaMustCompile"
SERVER_FLAG = "--xla_cpu_compilation_enabled"


@dataclasses.dataclass(frozen=True)
class XlaShapes:
    """The shapes the compiled function is called on: every (length, batch size) pair, nothing else.

    Attributes:
        lengths: sequence-length buckets, ascending; the last is the longest the preprocessor packs.
        batch_sizes: row counts, ascending (TF Serving's allowed_batch_sizes; the last is max_batch_size).
        warmup_max_length: the longest length bucket the warm-up records compile (None: every bucket). Longer
            buckets still answer; each (bucket, batch size) above it compiles on its first request instead of
            at load.
    """
    lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    warmup_max_length: int | None = None

    @property
    def warmup_lengths(self) -> tuple[int, ...]:
        """The length buckets the warm-up compiles (those up to `warmup_max_length`)."""
        cap = self.lengths[-1] if self.warmup_max_length is None else self.warmup_max_length
        return tuple(n for n in self.lengths if n <= cap)

    @classmethod
    def for_model(cls, model, lengths=None, batch_sizes=None, warmup_max_length=None) -> "XlaShapes":
        """The buckets for a task model's preprocessor: `lengths` below its longest packed length, plus that
        length (only that one with a fixed seq_length); `batch_sizes` as given (default BATCH_SIZES);
        `warmup_max_length` caps the warm-up (default: every bucket; it must reach the first bucket).

        Example:
            >>> XlaShapes.for_model(model).lengths            # max_seq_length 128     # doctest: +SKIP
            (16, 32, 64, 128)
            >>> XlaShapes.for_model(model, warmup_max_length=64).warmup_lengths          # doctest: +SKIP
            (16, 32, 64)
        """
        pre = model.require_preprocessor()
        top = pre.seq_length or pre.max_seq_length
        wanted = LENGTH_BUCKETS if lengths is None else tuple(lengths)
        sizes = tuple(sorted(set(BATCH_SIZES if batch_sizes is None else batch_sizes)))
        if not sizes or sizes[0] < 1:
            raise ValueError(f"batch sizes must be positive integers, got {batch_sizes}")
        if any(n < 3 for n in wanted):
            raise ValueError(f"length buckets must be at least 3 ([CLS] x [SEP]), got {lengths}")
        fixed = pre.seq_length is not None
        buckets = tuple(sorted({n for n in wanted if n < top and not fixed} | {top}))
        if warmup_max_length is not None and warmup_max_length < buckets[0]:
            raise ValueError(f"the warm-up cap {warmup_max_length} is below the first length bucket {buckets[0]} "
                             f"(buckets {buckets}): give at least {buckets[0]}, or leave it out to warm every bucket")
        return cls(buckets, sizes, warmup_max_length)


def _output_is_sequence(model) -> object:
    """The model's outputs (a nest like its outputs): True where dimension 1 runs over positions (it is None
    in the functional model, as the sequence length), False where it is fixed (classes)."""
    def sequence(t):
        return len(t.shape) >= 2 and t.shape[1] is None
    return tf.nest.map_structure(sequence, model.output)


def bucketed_inference(model, shapes: XlaShapes):
    """`ids -> outputs` like `model.inference`, running the model in one jit_compile function on padded shapes.

    Args:
        model: a task model (BertClassifier, BertSpanLabeler, BertTagger: ids [B, S]; BertMultipleChoice:
            [B, C, S]).
        shapes: the XlaShapes to pad to.

    Returns:
        A function of the id dict returning what `model(ids, training=False)` returns, sliced back to B rows
        (and S positions for per-position outputs).
    """
    choices = len(model.inputs[0].shape) == 3
    pre = model.require_preprocessor()
    spec = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}
    if choices:
        def core(ids):                   # [N, S] rows, one ending each: [N, 1, S] through the model -> [N]
            return model({k: v[:, None, :] for k, v in ids.items()}, training=False)[:, 0]
        is_sequence = False
    else:
        def core(ids):
            return model(ids, training=False)
        is_sequence = _output_is_sequence(model)
    compiled = tf.function(core, jit_compile=True, input_signature=[spec])
    out_specs = tf.nest.map_structure(lambda t: tf.TensorSpec(None, t.dtype),
                                      compiled.get_concrete_function().structured_outputs)
    pad = {"input_word_ids": pre.pad_id, "input_mask": 0, "input_type_ids": 0}
    lengths = tf.constant(shapes.lengths, tf.int32)
    sizes = tf.constant(shapes.batch_sizes, tf.int32)

    def padded_call(ids):
        ids = {k: tf.cast(ids[k], tf.int32) for k in INPUT_NAMES}
        rows, length = tf.shape(ids["input_word_ids"])[0], tf.shape(ids["input_word_ids"])[1]
        # The next bucket up (a longer from_ids input than the last bucket keeps its own length).
        bucket = tf.searchsorted(lengths, length[None], side="left")[0]
        target = tf.where(bucket < len(shapes.lengths), tf.gather(lengths, tf.minimum(bucket, len(shapes.lengths) - 1)),
                          length)
        slot = tf.searchsorted(sizes, rows[None], side="left")[0]
        size = tf.gather(sizes, tf.minimum(slot, len(shapes.batch_sizes) - 1))
        chunks = tf.maximum((rows + size - 1) // size, 1)
        x = {k: tf.reshape(tf.pad(v, [[0, chunks * size - rows], [0, target - length]], constant_values=pad[k]),
                           [chunks, size, target]) for k, v in ids.items()}
        out = tf.map_fn(compiled, x, fn_output_signature=out_specs, parallel_iterations=1)

        def cut(value, sequence):
            shape = tf.shape(value)
            value = tf.reshape(value, tf.concat([[shape[0] * shape[1]], shape[2:]], 0))[:rows]
            return value[:, :length] if sequence else value
        return tf.nest.map_structure(cut, out, is_sequence)

    def inference(ids):
        if not choices:
            return padded_call(ids)
        outer = tf.shape(ids["input_word_ids"])[:2]                       # [B, C]
        flat = {k: tf.reshape(v, [-1, tf.shape(v)[-1]]) for k, v in ids.items()}
        return tf.reshape(padded_call(flat), outer)

    return inference


@contextlib.contextmanager
def compiled_inference(model, shapes: XlaShapes):
    """Within the block, `model.inference` (what every serving signature calls) is `bucketed_inference`; the
    model is as before afterwards."""
    model.inference = bucketed_inference(model, shapes)
    try:
        yield model
    finally:
        del model.inference


# -- warm-up requests ----------------------------------------------------------------------------------------
def _filler_word(pre) -> str:
    """A word the preprocessor turns into exactly one piece, to build texts of a chosen token count."""
    for word in ("the", "a", "and", "of", "x", "1", "."):
        pieces = pre.tokenize(tf.constant([word])).numpy()[0].tolist()
        if len(pieces) == 1 and pre.vocab[pieces[0]] != "[UNK]":
            return word
    raise ValueError("no one-piece word found in the vocabulary to build warm-up texts")


def _example(keys: list[str], text: str) -> dict:
    """One example of a serving_default request whose packed sequence is `text` plus the special tokens."""
    if keys == ["text_a", "text_b"]:
        return {"text_a": text, "text_b": ""}
    if keys == ["question", "context"]:
        return {"question": "", "context": text}
    if keys == ["context", "endings"]:
        return {"context": text, "endings": [""]}
    return {keys[0]: text}


def _packed_shape(model, keys: list[str], example: dict) -> tuple[int, int]:
    """(rows, length) of the ids the model's preprocessing makes of one example."""
    batch = [tf.constant([example[k]]) for k in keys]
    ids = model.preprocess(tuple(batch) if len(batch) > 1 else batch[0])["input_word_ids"]
    shape = tf.shape(ids).numpy().tolist()
    return (shape[0] * shape[1], shape[2]) if len(shape) == 3 else (shape[0], shape[1])


def warmup_inputs(model, keys: list[str], shapes: XlaShapes) -> list[dict]:
    """serving_default inputs ({key: list}) whose ids land on each (length bucket, batch size) once, for the
    buckets up to `shapes.warmup_max_length`.

    Args:
        model: the task model being exported.
        keys: the serving_default input names, in order (e.g. ["text"], ["question", "context"]).
        shapes: the XlaShapes of the export.
    """
    word = _filler_word(model.require_preprocessor())
    requests, previous = [], 0
    for length in shapes.warmup_lengths:
        count = length
        while count > 0:
            rows, packed = _packed_shape(model, keys, _example(keys, " ".join([word] * count)))
            if rows == 1 and packed <= length:
                break
            count -= 1
        if not (rows == 1 and previous < packed <= length):
            raise ValueError(f"cannot build a warm-up text packing to the length bucket {length} (got {packed})")
        example = _example(keys, " ".join([word] * count))
        for size in shapes.batch_sizes:
            requests.append({k: [example[k]] * size for k in keys})
        previous = length
    return requests


# -- telling XLA exports apart -------------------------------------------------------------------------------
def must_compile_functions(export_dir: str) -> list[str]:
    """The functions of a SavedModel that must run XLA-compiled (`_XlaMustCompile` true on the function or on a
    call to it), sorted; [] for a plain export."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    names = set()
    for meta_graph in proto.meta_graphs:
        library = meta_graph.graph_def.library
        names.update(f.signature.name for f in library.function
                     if MUST_COMPILE in f.attr and f.attr[MUST_COMPILE].b)
        nodes = list(meta_graph.graph_def.node) + [n for f in library.function for n in f.node_def]
        names.update(n.attr["f"].func.name for n in nodes if MUST_COMPILE in n.attr and n.attr[MUST_COMPILE].b)
    return sorted(names)


def refusal(export_dir: str, functions: list[str]) -> str:
    """Why a server without XLA:CPU compilation does not serve the export, and the fix."""
    return (f"{export_dir} is an XLA export ({len(functions)} jit_compile function(s) marked {MUST_COMPILE}, "
            f"e.g. {functions[0]}) and XLA:CPU compilation is disabled, so its first compilation fails (TF "
            f"Serving: 'XLA compilation disabled'). Start the server with {SERVER_FLAG}: "
            f"`tensorflow_model_server {SERVER_FLAG}=true ...` (TF Serving), `bert-keras serve {SERVER_FLAG} ...`; "
            "or export without --xla")
