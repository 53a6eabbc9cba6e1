"""The value types of numeric flags, checked by argparse before a command starts: a batch size of 0, a negative
step count or a probability of 2 is a usage error (exit status 2, one `error:` line), not a traceback minutes later.

    p.add_argument("--batch-size", type=positive_int, default=32)
"""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") \
            from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (batch sizes, lengths, steps, counts)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (warm-up steps)."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (learning rates, epochs, epsilons, sizes in MB, timeouts)."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0 (weight decay, L2)."""
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1] (warm-up proportion, masking and short-sequence probabilities)."""
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value
