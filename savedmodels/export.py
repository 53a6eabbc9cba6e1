"""Write a trained task model as a TF Serving model: `<base>/<name>/<version>/` plus `<base>/<name>/model.keras`.

    export_task_model(keras.models.load_model("runs/sst2/model.keras"), "serving", "sst2")

The model carries all it needs: its preprocessor (vocab, casing, lengths), label names, segments, answer rules.

- The version folder is written under a temporary name and renamed into place, so TF Serving (which polls the
  base path) never loads a half-written version. A base path on a bucket (`gs://...`, which TF Serving reads
  directly) gets the folder built locally and uploaded with `saved_model.pb` last: the server's loader finds no
  SavedModel in the version folder until every file it reads is there (storage.publish_tree).
- Signatures: signatures.py, by the model's class (BertClassifier -> serving_default/classify or regress/from_ids;
  BertSpanLabeler -> question+context answers; BertMultipleChoice; BertTagger). Classify/Regress carry TF Serving's
  method names (method_names.py).
- assets.extra/tf_serving_warmup_requests: one real PredictRequest per signature with text inputs, which TF Serving
  replays at load so the first user request does not pay for tracing.
- `xla` (savedmodels/xla.py): the encoder + head in one jit_compile function on padded (length, batch) shapes,
  warm-up records for every such shape, and `allowed_batch_sizes` to match in batching_parameters.txt.
- The op check (ops.py) runs on the written graph: an op outside TF core + the TF.Text of the oldest stock server
  we support is an error before the version is published.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings

import tensorflow as tf

from bert_keras import storage
from bert_keras.atomic import atomic_file
from savedmodels import signatures as sig
from savedmodels.leftovers import exporting
from savedmodels.method_names import set_method_names
from savedmodels.saving import save_servable
from savedmodels.versions import newest_complete, numeric_versions


def task_signatures(model) -> list:
    from bert_keras.tasks import (BertClassifier, BertEmbedder, BertMaskedLM, BertMultipleChoice, BertSpanLabeler,
                                  BertTagger)
    builders = {BertClassifier: sig.classification, BertSpanLabeler: sig.span,     # a BertReranker is a classifier
                BertMultipleChoice: sig.multiple_choice, BertTagger: sig.tagging, BertMaskedLM: sig.masked_lm,
                BertEmbedder: sig.embedding}
    builder = next((b for kind, b in builders.items() if isinstance(model, kind)), None)
    if builder is None:
        raise TypeError(f"cannot export {type(model).__name__}: expected a bert_keras task model "
                        "(BertClassifier, BertSpanLabeler, BertMultipleChoice, BertTagger, BertMaskedLM, BertEmbedder)")
    model.require_preprocessor()               # raw text in: an ids-only model is refused before tracing
    return builder(model)


def next_version(model_dir: str) -> int:
    return max(numeric_versions(model_dir), default=0) + 1


def _warmup_records(path: str, model_name: str, requests: list[tuple[str, dict]]) -> None:
    """One PredictionLog record per (signature name, {input: strings}) request."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2
    with tf.io.TFRecordWriter(path) as writer:
        for name, inputs in requests:
            request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name=model_name,
                                                                                  signature_name=name))
            for key, value in inputs.items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())


def export_task_model(model, base_path: str, model_name: str, version: int | None = None,
                      keras_file: bool = True, xla=None) -> str:
    """Writes the version folder (and model.keras beside it); returns the version folder's path. `xla`: an
    xla.XlaShapes for the XLA export (None: the default export)."""
    model_dir = os.path.join(base_path, model_name)
    storage.makedirs(model_dir)
    version = version or next_version(model_dir)
    final = os.path.join(model_dir, str(version))
    if storage.exists(final):
        raise FileExistsError(f"{final} exists: TF Serving versions are immutable, choose another --version")
    signatures = task_signatures(model)
    requests = [(s.name, s.warmup) for s in signatures if s.warmup]
    compiled = contextlib.nullcontext()
    if xla is not None:
        from savedmodels.xla import compiled_inference, warmup_inputs
        default = next(s for s in signatures if s.name == "serving_default")
        requests += [("serving_default", inputs)
                     for inputs in warmup_inputs(model, [spec.name for spec in default.specs], xla)]
        compiled = compiled_inference(model, xla)
    with compiled:
        functions = {s.name: tf.function(s.function, input_signature=s.specs).get_concrete_function()
                     for s in signatures}
    methods = {s.name: s.method for s in signatures if s.method != sig.PREDICT}

    def finish(folder):
        if methods:
            set_method_names(folder, methods)
        os.makedirs(os.path.join(folder, "assets.extra"), exist_ok=True)
        _warmup_records(os.path.join(folder, "assets.extra", "tf_serving_warmup_requests"), model_name, requests)

    save_servable(final, functions, finish=finish)     # temp name ".N.partial-*": not numeric, TF Serving skips it
    if keras_file:                          # the model only: a fine-tuned model's optimizer state stays behind
        plain = model if getattr(model, "optimizer", None) is None else model.with_preprocessor(model.preprocessor)
        with atomic_file(os.path.join(model_dir, "model.keras")) as path:
            plain.save(path)
    return final


def write_batching_parameters(base_path: str, params=None) -> str:
    """`batching_parameters.txt` for `tensorflow_model_server --enable_batching --batching_parameters_file`:
    tuned on 2 CPU cores for single-sentence requests from a few concurrent clients (benchmarks/benchmark_serving.py
    measures it); an existing file (the operator's own) is left as it is, with a warning when `params` asks for
    allowed_batch_sizes it does not have."""
    from savedmodels.batching import BatchingParameters
    path = os.path.join(base_path, "batching_parameters.txt")
    if storage.exists(path) and params is not None and params.allowed_batch_sizes:
        have = BatchingParameters.read(path).allowed_batch_sizes
        if have != params.allowed_batch_sizes:
            warnings.warn(f"{path} is kept as it is: its allowed_batch_sizes {list(have)} are not the XLA export's "
                          f"{list(params.allowed_batch_sizes)} (the export pads batches to those in-graph anyway); "
                          "delete the file to have them written", stacklevel=3)
    if not storage.exists(path):
        params = params or BatchingParameters(max_batch_size=8, batch_timeout_micros=2000,
                                              num_batch_threads=2, max_enqueued_batches=100)
        with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write(params.to_text())
    return path


def write_models_config(base_path: str, model_names: list[str], container_base: str = "/models") -> str:
    """`models.config` for `tensorflow_model_server --model_config_file`, serving several models at once; on a
    bucket (`gs://...`) each model's base path is its folder there, which the server reads directly."""
    if storage.is_remote(base_path):
        container_base = base_path.rstrip("/")
    entries = "".join(f"  config {{\n    name: '{name}'\n    base_path: '{container_base}/{name}'\n"
                      f"    model_platform: 'tensorflow'\n  }}\n" for name in model_names)
    path = os.path.join(base_path, "models.config")
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("model_config_list {\n" + entries + "}\n")
    return path


@dataclasses.dataclass(frozen=True)
class ServingExport:
    """What `export_for_serving` wrote.

    Attributes:
        version: the new version folder, `<base>/<name>/<version>/` (the SavedModel).
        keras_file: `<base>/<name>/model.keras`, for `keras.models.load_model`.
        models_config: `<base>/models.config`, for `tensorflow_model_server --model_config_file`.
        batching_parameters: `<base>/batching_parameters.txt`, for `--batching_parameters_file`.
        model_names: every model the models.config lists (each model folder under the base path).
        unbatchable: the models of models.config that may not be batched (batching.may_batch): span models,
            whose per-window outputs do not have the batch as dimension 0, which TF Serving's `--enable_batching`
            requires of every output. The flag holds for the whole server, so one of them turns it off for all.
        xla: an XLA export, which the server runs only with `--xla_cpu_compilation_enabled=true`.
        removed: [(path, bytes)] of the temporaries killed exports had left under the base path, removed before
            this one wrote (leftovers.py).
    """
    version: str
    keras_file: str
    models_config: str
    batching_parameters: str
    model_names: tuple
    unbatchable: tuple = ()
    xla: bool = False
    removed: tuple = ()

    @property
    def batchable(self) -> bool:
        """May the server that serves models.config batch: does every model in it allow batching?"""
        return not self.unbatchable

    def serve_command(self, image: str = "tensorflow/serving:2.19.0") -> str:
        """The `docker run` line that serves the base path: with server-side batching only when every model in
        models.config may be batched (`unbatchable` is empty)."""
        base = os.path.dirname(self.models_config)
        remote = storage.is_remote(base)               # the server reads a bucket itself: no folder to mount
        models = base if remote else "/models"
        batching = (f" --enable_batching --batching_parameters_file={models}/batching_parameters.txt"
                    if self.batchable else "")
        xla = " --xla_cpu_compilation_enabled=true" if self.xla else ""
        mount = "" if remote else f" -v {os.path.abspath(base)}:/models"
        return (f"docker run -p 8500:8500 -p 8501:8501{mount} {image} "
                f"--model_config_file={models}/models.config{batching}{xla}")


def export_for_serving(model, base_path: str, model_name: str, version: int | None = None,
                       precision: str = "fp32", xla=False) -> ServingExport:
    """Writes a task model as a TF Serving model under `base_path`, with everything the server needs beside it.

    One sequence for the command line, the demo and the notebook: the version folder (atomic, op-checked,
    warm-up records), `model.keras` beside it, `models.config` listing every model under the base path, and
    `batching_parameters.txt` (an operator's own file is kept). What killed exports left under the base path is
    removed first, unless another export is writing there (leftovers.py).

    Args:
        model: a task model with its preprocessor (BertClassifier, BertSpanLabeler, BertMultipleChoice, BertTagger).
        base_path: the folder TF Serving is pointed at (`/models` in the container).
        model_name: the model's name in TF Serving (its folder under `base_path`).
        version: the version number; None takes the next free one.
        precision: "fp32", "bf16" or "int8" (savedmodels.precision).
        xla: True for the XLA export (savedmodels/xla.py: length buckets 16, 32, 64, 128 and the longest, batch
            sizes 1, 2, 4, 8, 16, 32), or an xla.XlaShapes for other buckets; False for the default export.

    Returns:
        ServingExport with the written paths.

    Example:
        >>> written = export_for_serving(load_task_model("runs/sst2"), "serving", "sst2")     # doctest: +SKIP
        >>> print(written.serve_command())                                                    # doctest: +SKIP
    """
    from savedmodels.batching import may_batch
    from savedmodels.precision import with_precision
    shapes, batching = None, None
    if xla:
        from savedmodels.batching import BatchingParameters
        from savedmodels.xla import XlaShapes
        shapes = xla if isinstance(xla, XlaShapes) else XlaShapes.for_model(model)
        batching = BatchingParameters(max_batch_size=shapes.batch_sizes[-1], batch_timeout_micros=2000,
                                      num_batch_threads=2, max_enqueued_batches=100,
                                      allowed_batch_sizes=shapes.batch_sizes)
    with exporting(base_path) as removed:
        path = export_task_model(with_precision(model, precision), base_path, model_name, version, xla=shapes)
        names = tuple(sorted(d for d in storage.listdir(base_path) if numeric_versions(os.path.join(base_path, d))))
        newest = {n: os.path.join(base_path, n, str(newest_complete(os.path.join(base_path, n))[0]
                                                    or numeric_versions(os.path.join(base_path, n))[-1]))
                  for n in names}
        return ServingExport(version=path, keras_file=os.path.join(base_path, model_name, "model.keras"),
                             models_config=write_models_config(base_path, list(names)),
                             batching_parameters=write_batching_parameters(base_path, batching), model_names=names,
                             unbatchable=tuple(n for n in names if not may_batch(newest[n])),
                             xla=shapes is not None, removed=tuple(removed))
