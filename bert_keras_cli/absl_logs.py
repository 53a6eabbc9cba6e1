"""TensorFlow's log lines off for the demo's own process (never set by the library): its C++ lines by
TF_CPP_MIN_LOG_LEVEL (quiet_tensorflow_cpp_logs), its Abseil INFO lines through Abseil (quiet_absl_info_logs).

TensorFlow 2.20 logs through two systems. Its own (tsl) lines obey TF_CPP_MIN_LOG_LEVEL, which bert_keras
defaults to 1. Parts built on Abseil's logging (absl/log) do not: the first TF1 `Session.run` of a process (the
local server's SavedModelBundle path) runs the MLIR V1 compatibility pass, whose
`LOG_FIRST_N(INFO, 1) << "MLIR V1 optimization pass is not enabled"`
(tensorflow/compiler/mlir/mlir_graph_optimization_pass.cc) prints, through Abseil's stderr sink, before any
`absl::InitializeLog()`:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795715694.766771   31027 mlir_graph_optimization_pass.cc:437] MLIR V1 optimization pass is not enabled

TF_CPP_MIN_LOG_LEVEL=3 leaves both (measured: TF 2.20.0, Linux x86-64). Abseil's own switches are out of reach
from Python: TensorFlow links neither absl/log:flags (no --minloglevel, no environment variable) nor exports
`absl::InitializeLog`, and has no Python binding for either. It does export Abseil's
`absl::SetMinLogLevel(absl::LogSeverityAtLeast)` from libtensorflow_framework.so.2 (absl/log/globals.h: messages
below the level are dropped before any sink, so neither line is written); its C++ name carries Abseil's LTS
version (`absl::lts_20250127::` in TF 2.20), read here from the library's symbol names. Where the library or the
symbol is not found (another platform or build), nothing changes and the lines show as before.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re

WARNING = 1             # absl::LogSeverityAtLeast::kWarning
CPP_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
_SYMBOL = re.compile(rb"_ZN4absl12lts_\d+14SetMinLogLevelENS0_18LogSeverityAtLeastE")


def quiet_tensorflow_cpp_logs() -> None:
    """TensorFlow's own C++ log lines off for the demo's process (as `make demo` runs it), unless the user set
    TF_CPP_MIN_LOG_LEVEL. Must run before TensorFlow loads.

    Why: on every machine without a CUDA driver the `tensorflow` wheel (CUDA-enabled since 2.15) logs
    "E ... failed call to cuInit: ... UNKNOWN ERROR (303)" at its first op (tensorflow/tensorflow#37689); no
    switch but this level removes it. The demo's own failures still raise Python errors with their messages.
    `TF_CPP_MIN_LOG_LEVEL=0 bert-keras demo` shows every line.

    Example:
        >>> quiet_tensorflow_cpp_logs()   # doctest: +SKIP
    """
    os.environ.setdefault(CPP_LOG_LEVEL, "3")


def quiet_absl_info_logs() -> bool:
    """Drops TensorFlow's Abseil INFO lines for the rest of this process (warnings and errors still print).

    For the demo's process only: a library user's process keeps TensorFlow's defaults.

    Returns:
        True if Abseil's minimum level was set; False where TensorFlow's framework library does not export
        `absl::SetMinLogLevel` (nothing changed).

    Example:
        >>> quiet_absl_info_logs()   # doctest: +SKIP
        True
    """
    import tensorflow as tf
    library = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2")
    if not os.path.isfile(library):
        return False
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        found = _SYMBOL.search(data)
        name = found.group().decode() if found else None
    if name is None:
        return False
    set_min_log_level = getattr(ctypes.CDLL(library), name, None)
    if set_min_log_level is None:
        return False
    set_min_log_level.argtypes, set_min_log_level.restype = [ctypes.c_int], None
    set_min_log_level(WARNING)
    return True
