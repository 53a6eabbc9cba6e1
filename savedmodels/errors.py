"""The two ways serving fails, shared by the session bundle, the batcher and the local server."""

from __future__ import annotations

import grpc


class ServingError(Exception):
    """A request the servable refuses: a gRPC status code and TF Serving's message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class LoadError(RuntimeError):
    """A version that cannot be served (load, restore or warmup failed); the message says which and why."""
