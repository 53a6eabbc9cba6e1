"""The one error every reader raises on malformed input."""

from __future__ import annotations

import os


class DataFormatError(ValueError):
    """Malformed input: the message names the file, the line (1-based, when known) and the problem."""

    def __init__(self, path, line: int | None, problem: str):
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):                      # rebuilt from its three fields (from a worker process, by pickle)
        return type(self), (self.path, self.line, self.problem)
