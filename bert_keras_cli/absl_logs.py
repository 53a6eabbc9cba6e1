"""TensorFlow's log lines off for the `bert-keras` command's process (never set by the library): its C++ lines
by TF_CPP_MIN_LOG_LEVEL (quiet_tensorflow_cpp_logs), its Abseil lines through Abseil (set_absl_min_log_level);
and Python's warnings one line each, without their source line (one_line_warnings). quiet_tensorflow_logs, which
main() runs before any command loads TensorFlow, does all three.

TensorFlow 2.20 logs through two systems. Its own (tsl) lines obey TF_CPP_MIN_LOG_LEVEL, which bert_keras
defaults to 1 for a library user's process. Parts built on Abseil's logging (absl/log) do not: the first TF1
`Session.run` of a process (the local server's SavedModelBundle path) runs the MLIR V1 compatibility pass, whose
`LOG_FIRST_N(INFO, 1) << "MLIR V1 optimization pass is not enabled"`
(tensorflow/compiler/mlir/mlir_graph_optimization_pass.cc) prints, through Abseil's stderr sink, before any
`absl::InitializeLog()`:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795715694.766771   31027 mlir_graph_optimization_pass.cc:437] MLIR V1 optimization pass is not enabled

and the LiteRT converter writes its Grappler INFO lines and "W... Ignored output_format." the same way.
TF_CPP_MIN_LOG_LEVEL=3 leaves all of them (measured: TF 2.20.0, Linux x86-64). Abseil's own switches are out of
reach from Python: TensorFlow links neither absl/log:flags (no --minloglevel, no environment variable) nor exports
`absl::InitializeLog`, and has no Python binding for either. It does export Abseil's
`absl::SetMinLogLevel(absl::LogSeverityAtLeast)` from libtensorflow_framework.so.2 (absl/log/globals.h: messages
below the level are dropped before any sink, so neither line is written); its C++ name carries Abseil's LTS
version (`absl::lts_20250127::` in TF 2.20), read here from the library's symbol names. The library is opened by
its path, without importing TensorFlow (its later import finds it loaded), so the level holds from TensorFlow's
first line. Where the library or the symbol is not found (another platform or build), nothing changes and the
lines show as before.
"""

from __future__ import annotations

import ctypes
import importlib.util
import mmap
import os
import re

WARNING = 1             # absl::LogSeverityAtLeast::kWarning (kInfo 0, kError 2, kFatal 3: TF_CPP_MIN_LOG_LEVEL's scale)
CPP_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
QUIET = "3"             # the command's default: TensorFlow's FATAL lines only
_SYMBOL = re.compile(rb"_ZN4absl12lts_\d+14SetMinLogLevelENS0_18LogSeverityAtLeastE")


def quiet_tensorflow_logs() -> bool:
    """No TensorFlow log line in the `bert-keras` command's process, unless the user set TF_CPP_MIN_LOG_LEVEL:
    its C++ lines at that level (3 when unset: quiet_tensorflow_cpp_logs) and its Abseil lines at the same level
    (0 shows every line, 1 hides INFO, 2 also WARNING, 3 also ERROR); and Python's warnings one line each
    (one_line_warnings). Runs before TensorFlow loads (main() calls it first); a command's failures still reach
    the user as Python errors with their messages.

    Returns:
        True if Abseil's level was set too (see set_absl_min_log_level).

    Example:
        >>> quiet_tensorflow_logs()   # doctest: +SKIP
        True
    """
    quiet_tensorflow_cpp_logs()
    one_line_warnings()
    return set_absl_min_log_level(cpp_log_level())


def one_line_warnings() -> None:
    """Python's warnings (Keras' and TensorFlow's `warnings.warn`) as one line each in the command's process:
    "<file>:<line>: <Category>: <message>", without the source line Python prints under it (for Keras' that line
    is its own `  warnings.warn(`) and with a message's line breaks as spaces. Which warnings show is left to
    Python's filters (`-W`, PYTHONWARNINGS).

    Example:
        >>> one_line_warnings()   # doctest: +SKIP
    """
    import warnings
    warnings.formatwarning = _one_line_warning


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"{filename}:{lineno}: {category.__name__}: {' '.join(str(message).split())}\n"


def quiet_tensorflow_cpp_logs() -> None:
    """TensorFlow's own C++ log lines off for the command's process, unless the user set TF_CPP_MIN_LOG_LEVEL.
    Must run before TensorFlow loads.

    Why: on every machine without a CUDA driver the `tensorflow` wheel (CUDA-enabled since 2.15) logs
    "E ... failed call to cuInit: ... UNKNOWN ERROR (303)" at its first op (tensorflow/tensorflow#37689). Only
    this level removes it: the wheel's CUDA stub fails before it reads CUDA_VISIBLE_DEVICES (an empty value
    leaves the line, measured on TF 2.20), so no GPU has to be hidden from anyone. Level 2 would still show it
    (it is an ERROR line), and "oneDNN supports DT_INT64 only on platforms with AVX-512" (pretrain). The
    command's own failures still raise Python errors with their messages; `TF_CPP_MIN_LOG_LEVEL=0 bert-keras ...`
    shows every line.

    Example:
        >>> quiet_tensorflow_cpp_logs()   # doctest: +SKIP
    """
    os.environ.setdefault(CPP_LOG_LEVEL, QUIET)


def cpp_log_level() -> int:
    """TensorFlow's C++ minimum log level, 0-3, as TF_CPP_MIN_LOG_LEVEL sets it (TensorFlow's reading: unset or not
    a number is 0)."""
    try:
        return min(max(int(os.environ.get(CPP_LOG_LEVEL, "0")), 0), 3)
    except ValueError:
        return 0


def quiet_absl_info_logs() -> bool:
    """Drops TensorFlow's Abseil INFO lines for the rest of this process (warnings and errors still print, unless
    TF_CPP_MIN_LOG_LEVEL asks for fewer: the command's default of 3 stays).

    For the demo's serving step: a library user's process keeps TensorFlow's defaults.

    Returns:
        True if Abseil's minimum level was set (see set_absl_min_log_level).

    Example:
        >>> quiet_absl_info_logs()   # doctest: +SKIP
        True
    """
    return set_absl_min_log_level(max(WARNING, cpp_log_level()))


def set_absl_min_log_level(level: int) -> bool:
    """Abseil's minimum log level in TensorFlow's framework library, for the rest of this process, without
    importing TensorFlow: lines below `level` are dropped (0 INFO, 1 WARNING, 2 ERROR, 3 FATAL).

    Args:
        level: int, absl::LogSeverityAtLeast (TF_CPP_MIN_LOG_LEVEL's scale).

    Returns:
        True if the level was set; False where TensorFlow is not installed or its framework library does not
        export `absl::SetMinLogLevel` (nothing changed).

    Example:
        >>> set_absl_min_log_level(WARNING)   # doctest: +SKIP
        True
    """
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return False
    library = os.path.join(list(spec.submodule_search_locations)[0], "libtensorflow_framework.so.2")
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
    set_min_log_level(level)
    return True
