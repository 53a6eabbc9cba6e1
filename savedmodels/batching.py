"""Server-side batching as TF Serving does it with `--enable_batching --batching_parameters_file=...`.

Concurrent requests to the same signature are queued and run as one Session.run: their inputs concatenated along
dimension 0, the outputs cut back per request (tensorflow_serving/batching/batching_session.cc over
BasicBatchScheduler). A batch runs when it holds its largest size, or `batch_timeout_micros` after its first
request arrived, on one of `num_batch_threads` threads (named after `thread_pool_name`); at most
`max_enqueued_batches` wait per signature (then UNAVAILABLE, as the server).

Every field of TF Serving's BatchingParameters (session_bundle_config.proto) is honoured as the server does:
- a request larger than `max_batch_size` is refused (INVALID_ARGUMENT "Task size ...");
- `enable_large_batch_splitting`: a request is split to fill the open batch and then batches of
  `max_execution_batch_size` (the largest batch that runs; `max_batch_size` then bounds a request), and its
  outputs are joined back in order;
- `allowed_batch_sizes` pads a batch up to the next allowed size with copies of the last request's first row
  (outputs of the padding are dropped); the last entry must equal `max_execution_batch_size` when splitting, else
  `max_batch_size`;
- `pad_variable_length_inputs`: inputs whose dimensions past the 0th differ are padded to the batch's largest with
  the tensor's first value (batching_util.cc AddPadding); without it such requests in one batch fail with
  FAILED_PRECONDITION, as the server's do;
- every output must have the batch as its 0th dimension (SQuAD's per-window outputs do not: span models are
  served without batching; `may_batch` tells from a SavedModel).

The parameters file is TF Serving's text proto (BatchingParameters), e.g. what `bert-keras export` writes:

    max_batch_size { value: 8 }
    batch_timeout_micros { value: 2000 }
    num_batch_threads { value: 2 }
    max_enqueued_batches { value: 100 }
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from typing import Callable

import grpc
import numpy as np

from savedmodels.errors import ServingError


WRAPPED = ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads",
           "thread_pool_name", "enable_large_batch_splitting", "max_execution_batch_size")   # `{ value: ... }`


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
    """TF Serving's BatchingParameters; a field left out takes the server's default (BasicBatchScheduler::Options).

    Args:
        max_batch_size: the largest request, and (without splitting) the largest batch.
        batch_timeout_micros: how long a batch waits for more requests after its first.
        max_enqueued_batches: batches that may wait per signature before requests are refused.
        num_batch_threads: threads running batches.
        thread_pool_name: the name of those threads.
        enable_large_batch_splitting: split requests across batches of `max_execution_batch_size`.
        max_execution_batch_size: the largest batch that runs when splitting (default: max_batch_size).
        allowed_batch_sizes: the batch sizes that run; a batch is padded up to the next one.
        pad_variable_length_inputs: pad inputs whose dimensions past the 0th differ within a batch.

    Example:
        >>> BatchingParameters.parse("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\nallowed_batch_sizes: 8")
        ... # doctest: +ELLIPSIS
        BatchingParameters(max_batch_size=8, ...)
    """
    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    thread_pool_name: str = "batch_threads"
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int | None = None
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False

    def __post_init__(self):
        for name in ("max_batch_size", "num_batch_threads", "max_enqueued_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"batching parameter {name} must be positive, got {getattr(self, name)}")
        if self.batch_timeout_micros < 0:
            raise ValueError(f"batching parameter batch_timeout_micros must be >= 0, got {self.batch_timeout_micros}")
        if self.max_execution_batch_size is not None and not self.enable_large_batch_splitting:
            raise ValueError("max_execution_batch_size is only used with enable_large_batch_splitting "
                             "{ value: true }: add that line or remove max_execution_batch_size")
        sizes, largest = list(self.allowed_batch_sizes), self.execution_batch_size
        if sizes and (sizes != sorted(set(sizes)) or sizes[0] < 1):
            raise ValueError(f"allowed_batch_sizes entries must be monotonically increasing, got {sizes}")
        if sizes and sizes[-1] != largest:
            what = "max_execution_batch_size" if self.enable_large_batch_splitting else "max_batch_size"
            raise ValueError(f"the last entry of allowed_batch_sizes must equal {what} ({largest}), got {sizes}")

    @property
    def execution_batch_size(self) -> int:
        """The largest batch that runs: max_execution_batch_size when splitting, else max_batch_size."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size is not None:
            return self.max_execution_batch_size
        return self.max_batch_size

    @classmethod
    def parse(cls, text: str) -> "BatchingParameters":
        """Reads TF Serving's text proto; an unknown field or a malformed line is an error naming it."""
        fields, sizes = {}, []
        for number, line in enumerate(text.splitlines(), 1):
            line = re.sub(r"#.*", "", line).strip()
            if not line:
                continue
            wrapped = re.fullmatch(r"(\w+)\s*\{\s*value\s*:\s*(\S+?)\s*\}", line)
            plain = re.fullmatch(r"(\w+)\s*:\s*(\S+)", line)
            name, value = (wrapped or plain).groups() if (wrapped or plain) else (line.split()[0], None)
            if name not in WRAPPED + ("allowed_batch_sizes", "pad_variable_length_inputs"):
                raise ValueError(f"unknown batching parameter {name!r} (line {number}): the file is TF Serving's "
                                 "BatchingParameters text proto, with the fields " +
                                 ", ".join(WRAPPED + ("allowed_batch_sizes", "pad_variable_length_inputs")))
            if value is None or bool(wrapped) != (name in WRAPPED):
                form = f"{name} {{ value: ... }}" if name in WRAPPED else f"{name}: ..."
                raise ValueError(f"line {number} ({line!r}): write {form}")
            if name == "allowed_batch_sizes":
                sizes.append(_number(name, value))
            elif name in ("enable_large_batch_splitting", "pad_variable_length_inputs"):
                if value.lower() not in ("true", "false"):
                    raise ValueError(f"{name} must be true or false, got {value!r}")
                fields[name] = value.lower() == "true"
            elif name == "thread_pool_name":
                fields[name] = value.strip("'\"")
            else:
                fields[name] = _number(name, value)
        return cls(**fields, allowed_batch_sizes=tuple(sizes))

    @classmethod
    def read(cls, path: str) -> "BatchingParameters":
        from bert_keras.data.text_files import read_text       # UTF-8, a bad byte named (line, byte offset)
        return cls.parse(read_text(path))

    def to_text(self) -> str:
        """The text proto: the four scheduling fields always, the others where they are set."""
        lines = [f"{name} {{ value: {getattr(self, name)} }}" for name in
                 ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")]
        if self.thread_pool_name != "batch_threads":
            lines.append(f"thread_pool_name {{ value: '{self.thread_pool_name}' }}")
        if self.enable_large_batch_splitting:
            lines.append("enable_large_batch_splitting { value: true }")
        if self.max_execution_batch_size is not None:
            lines.append(f"max_execution_batch_size {{ value: {self.max_execution_batch_size} }}")
        lines += [f"allowed_batch_sizes: {s}" for s in self.allowed_batch_sizes]
        if self.pad_variable_length_inputs:
            lines.append("pad_variable_length_inputs: true")
        return "\n".join(lines) + "\n"


def _number(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"batching parameter {name} must be an integer, got {value!r}") from None


PER_WINDOW_OUTPUT = "window_example"    # BertSpanLabeler.serve: which example each window (each logits row) is of


def may_batch(version_folder: str) -> bool:
    """May TF Serving's `--enable_batching` serve this SavedModel? Batching needs every output of every signature
    to have the batch as dimension 0. A span model's start/end logits are per window, with `window_example`
    saying which example each window is of: a SavedModel with that output may not be batched, nor one whose
    saved_model.pb cannot be read (batching stays off when in doubt: it is optional).

    Args:
        version_folder: str. A SavedModel folder, `<base>/<name>/<version>`.

    Returns:
        bool: True when no signature returns per-window outputs.

    Example:
        >>> may_batch("serving/squad/1"), may_batch("serving/ner/1")          # doctest: +SKIP
        (False, True)
    """
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel()
    try:
        from bert_keras import storage
        with storage.open(os.path.join(version_folder, "saved_model.pb"), "rb") as f:
            proto.ParseFromString(f.read())
    except (OSError, DecodeError):
        return False
    return not any(PER_WINDOW_OUTPUT in signature.outputs
                   for graph in proto.meta_graphs for signature in graph.signature_def.values())


def pad_to(value: np.ndarray, dims: list) -> np.ndarray:
    """Pads dimensions 1.. of `value` up to `dims` with its first value, as TF Serving's AddPadding."""
    widths = [(0, 0)] + [(0, d - n) for d, n in zip(dims, value.shape[1:])]
    if not any(w for _, w in widths) or value.size == 0:
        return value
    return np.pad(value, widths, mode="constant", constant_values=value.flat[0])


class _Task:
    """One request, or one piece of a split request: rows [start, start + size) of its inputs."""

    def __init__(self, inputs: dict, size: int):
        self.inputs, self.size = inputs, size
        self.done = threading.Event()
        self.outputs: dict | None = None
        self.error: Exception | None = None


class _Batch:
    def __init__(self):
        self.tasks: list[_Task] = []
        self.size, self.opened, self.closed = 0, time.monotonic(), False


class Batcher:
    """Batches `run(signature_name, {alias: array}) -> {alias: array}` calls (all outputs) across threads.

    `batch_sizes` records the size of every batch that ran (after padding), as TF Serving's
    `:tensorflow:serving:batching_session:processed_batch_size` metric does.
    """

    def __init__(self, run: Callable[[str, dict], dict], params: BatchingParameters):
        self._run, self.params = run, params
        self._queues: dict[tuple, list[_Batch]] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self.batch_sizes: list[int] = []
        self._threads = [threading.Thread(target=self._work, name=f"{params.thread_pool_name}-{i}", daemon=True)
                         for i in range(params.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    def run(self, signature_name: str, inputs: dict) -> dict:
        sizes = {alias: (v.shape[0] if v.ndim else None) for alias, v in inputs.items()}
        if any(s is None for s in sizes.values()) or len(set(sizes.values())) > 1:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "Batching Run() input tensors must have equal "
                               f"0th-dimension size ({', '.join(f'{a}: {s}' for a, s in sorted(sizes.items()))})")
        size = next(iter(sizes.values()), 0)
        if size > self.params.max_batch_size:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"Task size {size} is larger than maximum input "
                               f"batch size {self.params.max_batch_size}")
        key = (signature_name,) + tuple(sorted(inputs))           # TF Serving queues per signature, not per shape
        largest, pieces = self.params.execution_batch_size, []
        with self._cond:
            batches = self._queues.setdefault(key, [])
            start = 0
            while start < size or not pieces:
                open_batch = batches[-1] if batches and not batches[-1].closed else None
                room = largest - open_batch.size if open_batch else largest
                if open_batch and (room <= 0 or (not self.params.enable_large_batch_splitting and size > room)):
                    open_batch.closed, open_batch = True, None
                    room = largest
                if open_batch is None:
                    if len(batches) >= self.params.max_enqueued_batches:
                        for piece in pieces:                  # a refused request leaves no piece behind
                            piece.inputs = None
                        raise ServingError(grpc.StatusCode.UNAVAILABLE, "The batch scheduling queue to which this "
                                           "task was submitted is full")
                    open_batch = _Batch()
                    batches.append(open_batch)
                take = min(size - start, room) if self.params.enable_large_batch_splitting else size
                piece = _Task({a: v[start:start + take] for a, v in inputs.items()}, take)
                open_batch.tasks.append(piece)
                open_batch.size += take
                open_batch.closed = open_batch.size >= largest
                pieces.append(piece)
                start += take
            self._cond.notify_all()
        for piece in pieces:
            piece.done.wait()
        error = next((p.error for p in pieces if p.error is not None), None)
        if error is not None:
            raise error
        if len(pieces) == 1:
            return pieces[0].outputs
        return {a: np.concatenate([p.outputs[a] for p in pieces]) for a in pieces[0].outputs}

    def _next(self):
        """(signature key, batch) ready to run, or the seconds until one may be; under the lock."""
        timeout = self.params.batch_timeout_micros / 1e6
        soonest = None
        for key, batches in self._queues.items():
            if batches:
                ready_at = batches[0].opened + (0 if batches[0].closed else timeout)
                if ready_at <= time.monotonic():
                    return key, batches.pop(0)
                soonest = ready_at if soonest is None else min(soonest, ready_at)
        return None, (None if soonest is None else soonest - time.monotonic())

    def _work(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    key, batch = self._next()
                    if key is not None:
                        break
                    self._cond.wait(batch)
            self._process(key[0], batch)

    def _merge(self, tasks: list, padded: int) -> dict:
        """The batch's inputs: per alias, the tasks' rows (padded past dimension 0 if allowed), then padding rows
        (the last task's first row) up to the allowed batch size. batching_session.cc MergeInputTensors."""
        tasks = [t for t in tasks if t.inputs is not None]
        merged = {}
        for alias in tasks[0].inputs:
            values = [t.inputs[alias] for t in tasks]
            shapes = {v.shape[1:] for v in values}
            if len(shapes) > 1:
                if not self.params.pad_variable_length_inputs:
                    raise ServingError(grpc.StatusCode.FAILED_PRECONDITION, f"Tensors with name '{alias}' from "
                                       "different tasks have different shapes and padding is turned off. Set "
                                       "pad_variable_length_inputs to true, or ensure that all tensors with the "
                                       "same name have equal dimensions starting with the first dim.")
                dims = [max(d) for d in zip(*shapes)]
                values = [pad_to(v, dims) for v in values]
            rows = sum(len(v) for v in values)
            if padded > rows:
                values.append(np.repeat(values[-1][:1], padded - rows, axis=0))
            merged[alias] = np.concatenate(values)
        return merged

    def _process(self, signature_name: str, batch: _Batch) -> None:
        tasks = [t for t in batch.tasks if t.inputs is not None]
        try:
            size = sum(t.size for t in tasks)
            padded = next((s for s in self.params.allowed_batch_sizes if s >= size), size)
            outputs = self._run(signature_name, self._merge(tasks, padded))
            self.batch_sizes.append(padded)
            for alias, value in outputs.items():
                if np.ndim(value) == 0 or np.shape(value)[0] != padded:
                    raise ServingError(grpc.StatusCode.FAILED_PRECONDITION, f"Batched output tensor {alias!r} has "
                                       f"0th dimension {np.shape(value)[0] if np.ndim(value) else 'none'}, not the "
                                       f"batch size {padded}: this signature cannot be served with batching")
            start = 0
            for task in tasks:
                task.outputs = {a: v[start:start + task.size] for a, v in outputs.items()}
                start += task.size
        except Exception as e:            # noqa: BLE001  (every request of the batch gets the batch's error)
            for task in tasks:
                task.error = e
        for task in batch.tasks:
            task.done.set()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
