"""An in-process TF Serving for tests, the demo and `bert-keras serve`: the gRPC PredictionService over
`<model_base_path>/<version>/` folders, on TF Serving's own execution path.

The stock `tensorflow_model_server` cannot be installed on these machines. This server does what it does with a
version, in the same order, so an export that passes here passes there:
  load      session_bundle.SessionBundle: MetaGraph import, the saver's restore op, the init op (no
            `tf.saved_model.load` anywhere), then the warmup records of assets.extra/ replayed through the same
            Predict/Classify/Regress code as user requests. A version whose load or warmup fails is refused with a
            log line that says why; the version being served, if any, keeps serving.
  versions  the latest-version policy: the base path is polled (every `poll_seconds`, as
            --file_system_poll_wait_seconds) and the newest complete numeric folder is loaded beside the serving
            one, then swapped in. A newer folder that is not a whole SavedModel yet (no saved_model.pb, no
            variables: an upload or copy still running, or stopped part-way; versions.py) is skipped with one log
            line naming it and what it lacks, at start-up too, where the newest complete version is served. A
            request holds the version it started on until it ends, and the old session is closed only when its
            last request has answered: no request fails or mixes versions during a swap.
            A refused version is retried `max_load_retries` times, `retry_seconds` apart (TF Serving's
            --max_num_load_retries, --load_retry_interval_micros), then left alone.
  port      the port is the server's alone: no SO_REUSEPORT (gRPC sets it by default, and a second server on
            the port would then take half the requests), and a port in use is refused (PortInUse) before any
            model loads.
  RPCs      Predict, Classify, Regress and GetModelMetadata, with TF Serving's status codes and messages.
  batching  with `batching` (batching.BatchingParameters, TF Serving's --enable_batching
            --batching_parameters_file), concurrent requests to a signature run as one batch (batching.py).
  XLA       an XLA export (`bert-keras export --xla`) is served only with `xla_cpu_compilation_enabled`
            (--xla_cpu_compilation_enabled=true), else refused at load with the fix in the reason.
It is not a production server: no REST, no model config reloads.

    server, port = start_server({"sst2": "serving/sst2"})
    ...
    server.stop()
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import logging
import os
import socket
import threading
import time

import grpc
from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

from savedmodels.errors import LoadError, PortInUse, ServingError
from savedmodels.session_bundle import SessionBundle
from savedmodels.versions import newest_complete, numeric_versions

log = logging.getLogger("savedmodels.local_server")


class _Version:
    """A loaded version and the requests using it; closed when retired and its last request is done."""

    def __init__(self, number: int, bundle: SessionBundle):
        self.number, self.bundle, self.users, self.retired = number, bundle, 0, False


class ModelVersions:
    """One model: the version it serves, the next one loading, the refused ones."""

    def __init__(self, name: str, base_path: str, max_load_retries: int = 5, retry_seconds: float = 60.0,
                 batching=None, xla_cpu_compilation_enabled: bool = False):
        self.name, self.base_path, self.batching = name, base_path, batching
        self.xla_cpu_compilation_enabled = xla_cpu_compilation_enabled
        self.max_load_retries, self.retry_seconds = max_load_retries, retry_seconds
        self.current: _Version | None = None
        self._lock = threading.Lock()                             # guards current and the users counts
        self._poll_lock = threading.Lock()                        # one load at a time
        self._failures: dict[int, tuple[int, float]] = {}       # version -> (attempts, time of the last)
        self._skipped: set[tuple[int, str]] = set()              # (incomplete version, what it lacks), logged

    def _load(self, number: int) -> _Version:
        path = os.path.join(self.base_path, str(number))
        started = time.perf_counter()
        bundle = SessionBundle(path, batching=self.batching,
                               xla_cpu_compilation_enabled=self.xla_cpu_compilation_enabled)
        try:
            replayed = bundle.warmup()
        except LoadError:
            bundle.close()
            raise
        log.info("%s: version %d loaded from %s (%d warmup requests replayed) in %.1f s", self.name, number, path,
                 replayed, time.perf_counter() - started)
        return _Version(number, bundle)

    def poll(self) -> None:
        """Loads the newest version if it is not the one serving (and not given up on), then swaps it in."""
        with self._poll_lock:
            self._poll()

    def newest(self) -> int | None:
        """The newest complete version (None: there is none); each newer incomplete one is logged once."""
        newest, skipped = newest_complete(self.base_path)
        for version, reason in sorted(skipped.items()):
            if (version, reason) not in self._skipped:
                self._skipped.add((version, reason))
                instead = (f"serving version {newest}, the newest complete one" if newest is not None
                           else "no version is complete")
                log.warning("%s: version %d skipped: incomplete, %s (an export, upload or copy still running, or "
                            "stopped part-way; it loads once whole); %s", self.name, version, reason, instead)
        return newest

    def _poll(self) -> None:
        newest = self.newest()
        if newest is None or (self.current and self.current.number == newest):
            return
        attempts, last = self._failures.get(newest, (0, 0.0))
        if attempts > self.max_load_retries or (attempts and time.monotonic() - last < self.retry_seconds):
            return
        try:
            version = self._load(newest)
        except LoadError as e:
            self._failures[newest] = (attempts + 1, time.monotonic())
            serving = f"version {self.current.number} keeps serving" if self.current else "nothing is served"
            log.error("%s: version %d refused (attempt %d of %d): %s; %s", self.name, newest, attempts + 1,
                      self.max_load_retries + 1, e, serving)
            return
        self._failures.pop(newest, None)
        with self._lock:
            old, self.current = self.current, version
            if old:
                old.retired = True
                close = old.users == 0
        if old:
            log.info("%s: now serving version %d; version %d unloads after its last request", self.name, newest,
                     old.number)
            if close:
                old.bundle.close()

    @contextlib.contextmanager
    def acquire(self, requested: int | None):
        """The serving version (or NOT_FOUND), held until the block ends."""
        with self._lock:
            version = self.current
            if version is None:
                raise ServingError(grpc.StatusCode.NOT_FOUND,
                                   f"Servable not found for request: Latest({self.name}) (no version loaded)")
            if requested is not None and requested != version.number:
                raise ServingError(grpc.StatusCode.NOT_FOUND,
                                   f"Servable not found for request: Specific({self.name}, {requested})")
            version.users += 1
        try:
            yield version
        finally:
            with self._lock:
                version.users -= 1
                close = version.retired and version.users == 0
            if close:
                version.bundle.close()

    def close(self) -> None:
        with self._lock:
            version, self.current = self.current, None
        if version:
            version.bundle.close()


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, models: dict[str, ModelVersions]):
        self.models = models

    @contextlib.contextmanager
    def _serving(self, model_spec, context):
        """The version a request runs on; ServingError -> the gRPC status it names."""
        try:
            model = self.models.get(model_spec.name)
            if model is None:
                raise ServingError(grpc.StatusCode.NOT_FOUND,
                                   f"Servable not found for request: Latest({model_spec.name})")
            if model_spec.WhichOneof("version_choice") == "version_label":
                raise ServingError(grpc.StatusCode.NOT_FOUND, f"Unrecognized servable version label: "
                                   f"{model_spec.version_label} (this server has no version labels)")
            requested = model_spec.version.value if model_spec.HasField("version") else None
            with model.acquire(requested) as version:
                yield version
        except ServingError as e:
            context.abort(e.code, e.message)

    @staticmethod
    def _model_spec(response, request, version: _Version, method_default: str = "serving_default"):
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = version.number
        response.model_spec.signature_name = request.model_spec.signature_name or method_default

    def _answer(self, request, context, method: str):
        """Predict, Classify or Regress on the version the request gets, its model_spec filled in."""
        with self._serving(request.model_spec, context) as version:
            response = getattr(version.bundle, method)(request)
            self._model_spec(response, request, version)
            return response

    def Predict(self, request, context):
        return self._answer(request, context, "predict")

    def Classify(self, request, context):
        return self._answer(request, context, "classify")

    def Regress(self, request, context):
        return self._answer(request, context, "regress")

    def GetModelMetadata(self, request, context):
        with self._serving(request.model_spec, context) as version:
            for field in request.metadata_field:
                if field != "signature_def":
                    raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                       f"Metadata field {field} is not supported")
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.name = request.model_spec.name
            response.model_spec.version.value = version.number
            signatures = get_model_metadata_pb2.SignatureDefMap()
            for key, value in version.bundle.signature_defs.items():
                signatures.signature_def[key].CopyFrom(value)
            response.metadata["signature_def"].Pack(signatures)
            return response


class LocalServer:
    """The gRPC server, its models and the thread that polls their base paths. `stop()` ends all three."""

    def __init__(self, grpc_server, models: dict[str, ModelVersions], poll_seconds: float):
        self.grpc_server, self.models, self.poll_seconds = grpc_server, models, poll_seconds
        self._stopped = threading.Event()
        self._poller = threading.Thread(target=self._poll_forever, name="model-version-poller", daemon=True)
        self._poller.start()

    def _poll_forever(self) -> None:
        while not self._stopped.wait(self.poll_seconds):
            for model in self.models.values():
                try:
                    model.poll()
                except Exception:         # noqa: BLE001  (a poll must never end the poller)
                    log.exception("%s: polling %s failed", model.name, model.base_path)

    def poll_now(self) -> None:
        """One poll of every model's base path, on the caller's thread (tests, tools)."""
        for model in self.models.values():
            model.poll()

    def serving_version(self, name: str) -> int | None:
        current = self.models[name].current
        return current.number if current else None

    def wait_for_signal(self, announce=lambda: None, stop_seconds: float = 30.0) -> None:
        """Serves until SIGINT (Ctrl-C) or SIGTERM (`docker stop`), then stops. The signals only set an event,
        caught from before `announce()` (which tells clients the server is up) on, so wherever one lands the stop
        runs the same way; if the stop or the interpreter's exit has not ended the process `stop_seconds` later,
        every thread's stack goes to stderr and the process exits with status 1 (a server that ignores Ctrl-C
        keeps its port, and a terminal or a test waiting). Main thread only.

        Args:
            announce: called once the signals are caught (`bert-keras serve` prints its "serving ..." line there).
            stop_seconds: how long the stop and the exit may take before the process is ended.

        Example:
            >>> server, port = start_server({"sst2": "serving/sst2"})                    # doctest: +SKIP
            >>> server.wait_for_signal(lambda: print("serving on", port, flush=True))   # doctest: +SKIP
        """
        import faulthandler
        import signal
        import sys

        signalled = threading.Event()
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, lambda *_: signalled.set())
        announce()
        while not signalled.wait(1.0):
            pass

        def give_up():
            print(f"the server did not stop within {stop_seconds:g} s; its threads:", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(sys.stderr, all_threads=True)
            os._exit(1)

        watchdog = threading.Timer(stop_seconds, give_up)
        watchdog.daemon = True                    # runs on through the interpreter's exit, where a hang would be
        watchdog.start()
        self.stop(0)

    def stop(self, grace: float | None = 0):
        self._stopped.set()
        self._poller.join()
        event = self.grpc_server.stop(grace)
        event.wait()
        for model in self.models.values():
            model.close()
        return event


def bind(server, port: int) -> int:
    """Binds a gRPC server (made with `("grpc.so_reuseport", 0)`) to 127.0.0.1:`port` alone; returns the bound port
    (a free one for 0). A port another socket holds is refused before gRPC tries it (whose refusal is a C++ log
    line and a RuntimeError without the reason).

    Args:
        server: a grpc.server, not started.
        port: the port; 0 for any free one.

    Raises:
        PortInUse: the port is taken (or may not be bound: a privileged port, EACCES).
        ValueError: not a port number.

    Example:
        >>> server = grpc.server(concurrent.futures.ThreadPoolExecutor(2), options=[("grpc.so_reuseport", 0)])
        >>> bind(server, 0) > 0
        True
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0-65535 (0: any free one)")
    if port:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)       # as gRPC: TIME_WAIT is no owner
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise PortInUse(port, "is in use (another server?)" if e.errno == errno.EADDRINUSE
                            else f"cannot be bound: {e.strerror}") from None
        finally:
            probe.close()
    try:
        return server.add_insecure_port(f"127.0.0.1:{port}")
    except RuntimeError:                         # taken between the probe and the bind
        raise PortInUse(port, "is in use (another server?)") from None


def start_server(models: dict[str, str], port: int = 0, workers: int = 8, poll_seconds: float = 1.0,
                 max_load_retries: int = 5, retry_seconds: float = 60.0, batching=None,
                 xla_cpu_compilation_enabled: bool = False):
    """Serves {model name: base path} on 127.0.0.1:`port`; returns (LocalServer, bound port). Stop with
    server.stop().

    Like tensorflow_model_server at start-up, each model's newest complete version must load; newer incomplete
    versions are skipped with a log line naming them, and later versions are picked up by polling. The port is
    bound after the base paths are read and before any model loads, without SO_REUSEPORT, so a port in use fails
    at once.

    Args:
        models: {model name: base path holding its numeric version folders}.
        port: the port on 127.0.0.1; 0 for a free one (the second value returned).
        workers: gRPC threads.
        poll_seconds: how often the base paths are polled for a new version.
        max_load_retries: attempts at a refused version after the first (TF Serving's --max_num_load_retries).
        retry_seconds: time between them.
        batching: batching.BatchingParameters for every model (TF Serving's --enable_batching), or None.
        xla_cpu_compilation_enabled: serve XLA exports (TF Serving's --xla_cpu_compilation_enabled=true); without
            it they are refused at load with the reason and this fix.

    Raises:
        PortInUse: `port` is taken.
        FileNotFoundError: a base path has no numeric version folder, or no complete one.
        RuntimeError: a model's newest complete version is refused (the reason).

    Example:
        >>> server, port = start_server({"sst2": "serving/sst2"}, port=8500)     # doctest: +SKIP
        >>> server.stop()                                                       # doctest: +SKIP
    """
    newest = {}
    for name, base_path in models.items():                     # what to serve: before the port, before any load
        if not numeric_versions(base_path):
            raise FileNotFoundError(f"{base_path} has no numeric version folder (expected {base_path}/1/...): "
                                    "export one with `bert-keras export`")
        newest[name], lacking = newest_complete(base_path)
        if newest[name] is None:
            lacking = "; ".join(f"{v}: {r}" for v, r in sorted(lacking.items(), reverse=True))
            raise FileNotFoundError(f"{base_path} has no complete version to serve ({lacking}): export one "
                                    "with `bert-keras export`")
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=workers),
                         options=[("grpc.max_receive_message_length", 64 << 20),
                                  ("grpc.max_send_message_length", 64 << 20),
                                  ("grpc.so_reuseport", 0)])
    loaded = {}
    try:
        bound = bind(server, port)
        for name, base_path in models.items():
            model = ModelVersions(name, base_path, max_load_retries, retry_seconds, batching,
                                  xla_cpu_compilation_enabled)
            loaded[name] = model
            model.newest()                            # logs the newer incomplete versions it skips
            try:
                model.current = model._load(newest[name])
            except LoadError as e:
                raise RuntimeError(f"{name}: version {newest[name]} could not be served: {e}") from e
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(loaded), server)
        server.start()
    except BaseException:
        server.stop(None)
        for model in loaded.values():
            model.close()
        raise
    return LocalServer(server, loaded, poll_seconds), bound
