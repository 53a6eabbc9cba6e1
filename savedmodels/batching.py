"""Server-side batching as TF Serving does it with `--enable_batching --batching_parameters_file=...`.

Concurrent requests to the same signature (with the same shapes past the batch dimension) are queued and run as
one Session.run: their inputs concatenated along dimension 0, the outputs cut back per request
(tensorflow_serving/batching/batching_session.cc over BasicBatchScheduler). A batch runs when it holds
`max_batch_size` examples, or `batch_timeout_micros` after its first request arrived, on one of
`num_batch_threads` threads; at most `max_enqueued_batches` wait per signature (then UNAVAILABLE, as the server).
TF Serving's rules that show to a client, kept: all inputs of a request must have the same 0th dimension; a
request larger than `max_batch_size` is refused (no large-batch splitting here: `enable_large_batch_splitting`,
`max_execution_batch_size` and `pad_variable_length_inputs` are read, and a warning names them when set); every
output must have the batch as its 0th dimension (SQuAD's per-window outputs do not: serve span models without
batching); `allowed_batch_sizes` pads a batch with copies of its first example up to the next allowed size.

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
import warnings
from typing import Callable

import grpc
import numpy as np

from savedmodels.errors import ServingError


# TF Serving fields the local server reads but does not act on, and what they would change there.
NOT_IMPLEMENTED = {
    "enable_large_batch_splitting": "TF Serving splits a request larger than max_batch_size; here it is refused",
    "max_execution_batch_size": "the size of the split batches; here a batch is at most max_batch_size",
    "pad_variable_length_inputs": "TF Serving pads inputs of different lengths to batch them; here only "
                                  "requests of equal shapes past the batch dimension share a batch",
}


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
    """TF Serving's defaults where a field is absent (BasicBatchScheduler::Options)."""
    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    allowed_batch_sizes: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "BatchingParameters":
        text = re.sub(r"#.*", "", text)
        fields = dict(re.findall(r"(\w+)\s*\{\s*value\s*:\s*([^\s}]+)\s*\}", text))
        sizes = tuple(int(v) for v in re.findall(r"allowed_batch_sizes\s*:\s*(\d+)", text))
        own = {f.name for f in dataclasses.fields(cls)}
        known = own | set(NOT_IMPLEMENTED) | {"thread_pool_name"}
        unknown = [n for n in re.findall(r"^\s*(\w+)", text, re.M) if n not in known]
        if unknown:
            raise ValueError(f"unknown batching parameter(s) {', '.join(sorted(set(unknown)))}: the file is TF "
                             "Serving's BatchingParameters text proto, e.g. `max_batch_size { value: 8 }`")
        fields.update(re.findall(r"(pad_variable_length_inputs)\s*:\s*(\w+)", text))   # a plain bool field
        ignored = [n for n in NOT_IMPLEMENTED if fields.get(n, "false").lower() not in ("false", "0")]
        if ignored:
            warnings.warn("the local server does not implement " + "; ".join(
                f"{n} ({NOT_IMPLEMENTED[n]})" for n in ignored) + ": it runs as if they were absent. TF Serving "
                "honours them; remove them to silence this warning", stacklevel=2)
        params = cls(**{k: int(v) for k, v in fields.items() if k in own}, allowed_batch_sizes=sizes)
        if params.max_batch_size < 1 or params.num_batch_threads < 1 or params.max_enqueued_batches < 1:
            raise ValueError(f"batching parameters must be positive: {params}")
        if sizes and (list(sizes) != sorted(sizes) or sizes[-1] != params.max_batch_size):
            raise ValueError("allowed_batch_sizes must increase and end with max_batch_size "
                             f"({params.max_batch_size}), got {list(sizes)}")
        return params

    @classmethod
    def read(cls, path: str) -> "BatchingParameters":
        with open(path, encoding="utf-8") as f:
            return cls.parse(f.read())

    def to_text(self) -> str:
        lines = [f"{name} {{ value: {getattr(self, name)} }}" for name in
                 ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")]
        return "\n".join(lines + [f"allowed_batch_sizes: {s}" for s in self.allowed_batch_sizes]) + "\n"


class _Task:
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
    """Batches `run(signature_name, {alias: array}) -> {alias: array}` calls (all outputs) across threads."""

    def __init__(self, run: Callable[[str, dict], dict], params: BatchingParameters):
        self._run, self.params = run, params
        self._queues: dict[tuple, list[_Batch]] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self._threads = [threading.Thread(target=self._work, name=f"batch-thread-{i}", daemon=True)
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
        key = (signature_name,) + tuple(sorted((a, v.shape[1:], v.dtype.str) for a, v in inputs.items()))
        task = _Task(inputs, size)
        with self._cond:
            batches = self._queues.setdefault(key, [])
            if not batches or batches[-1].closed or batches[-1].size + size > self.params.max_batch_size:
                if batches and not batches[-1].closed:
                    batches[-1].closed = True
                if len(batches) >= self.params.max_enqueued_batches:
                    raise ServingError(grpc.StatusCode.UNAVAILABLE, "The batch scheduling queue to which this "
                                       "task was submitted is full")
                batches.append(_Batch())
            batch = batches[-1]
            batch.tasks.append(task)
            batch.size += size
            batch.closed = batch.size >= self.params.max_batch_size
            self._cond.notify_all()
        task.done.wait()
        if task.error is not None:
            raise task.error
        return task.outputs

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

    def _process(self, signature_name: str, batch: _Batch) -> None:
        tasks = batch.tasks
        try:
            inputs = {alias: np.concatenate([t.inputs[alias] for t in tasks]) for alias in tasks[0].inputs}
            padded = next((s for s in self.params.allowed_batch_sizes if s >= batch.size), batch.size)
            if padded > batch.size:
                inputs = {a: np.concatenate([v, np.repeat(v[:1], padded - batch.size, axis=0)])
                          for a, v in inputs.items()}
            outputs = self._run(signature_name, inputs)
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
        for task in tasks:
            task.done.set()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
