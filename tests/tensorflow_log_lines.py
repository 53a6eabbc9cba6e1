"""TensorFlow's own log lines in a process's stderr, for the tests that hold the `bert-keras` command to printing none
(issue 48: "no TensorFlow log line on a CPU-only machine"). The formats, as TensorFlow 2.20 writes them:

    2026-11-29 05:03:20.837848: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] failed call ...
    I0000 00:00:1795928593.418285    7481 devices.cc:67] Number of eligible GPUs ...              (Abseil's)
    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    INFO:tensorflow:Restoring parameters from ...                                                (tf.get_logger())

plus the continuation lines of the start-up notices ("To enable the following instructions: ...")."""

import os
import re

LOG_LINE = re.compile(r"^(?:[IWEF]\d{4} |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |(?:INFO|WARNING|ERROR):tensorflow:"
                      r"|WARNING: All log messages before absl::InitializeLog)")
KNOWN = ("failed call to cuInit", "oneDNN custom operations", "This TensorFlow binary is optimized",
         "To enable the following instructions", "Could not find cuda drivers", "need TFLite custom op")


def tensorflow_log_lines(stderr: str) -> list[str]:
    """The lines of `stderr` that TensorFlow's logging wrote."""
    return [line for line in stderr.splitlines() if LOG_LINE.match(line) or any(text in line for text in KNOWN)]


def command_env(**extra) -> dict:
    """os.environ as a user's shell has it: without TF_CPP_MIN_LOG_LEVEL (`make` exports 3, which would hide what
    these tests look for), plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}, **extra}
