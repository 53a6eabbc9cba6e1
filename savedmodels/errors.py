"""The ways serving fails, shared by the session bundle, the batcher and the local server."""

from __future__ import annotations

import grpc


class ServingError(Exception):
    """A request the servable refuses: a gRPC status code and TF Serving's message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class LoadError(RuntimeError):
    """A version that cannot be served (load, restore or warmup failed); the message says which and why."""


class PortInUse(OSError):
    """The local server's port is taken by another socket (or may not be bound); `port` names it.

    Args:
        port: the port asked for.
        why: what is wrong with it ("is in use (another server?)").

    Example:
        >>> str(PortInUse(8500, "is in use (another server?)"))
        'port 8500 is in use (another server?): stop what holds it or serve on another port'
    """

    def __init__(self, port: int, why: str):
        super().__init__(f"port {port} {why}: stop what holds it or serve on another port")
        self.port, self.why = port, why
