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


def _checked(kind, accept, needs: str, doc: str):
    """An argparse type: `text` read as `kind` (int or float) and kept when `accept(value)`, else `needs` named."""
    def parse(text: str):
        value = _number(text, kind)
        if not accept(value):
            raise argparse.ArgumentTypeError(f"must be {needs}, got {text}")
        return value
    parse.__doc__ = doc
    return parse


INT32_MAX = 2**31 - 1      # what TensorFlow's int32 shapes and counters hold: a larger count is never meant
positive_int = _checked(int, lambda v: 1 <= v <= INT32_MAX, f"a positive integer up to {INT32_MAX:,}",
                        "An integer in [1, 2**31 - 1] (batch sizes, lengths, steps, counts).")
non_negative_int = _checked(int, lambda v: 0 <= v <= INT32_MAX, f"0 or more, up to {INT32_MAX:,}",
                            "An integer in [0, 2**31 - 1] (warm-up steps).")
positive_float = _checked(float, lambda v: v > 0, "a positive number",
                          "A number > 0 (learning rates, epochs, epsilons, sizes in MB, timeouts).")
non_negative_float = _checked(float, lambda v: v >= 0, "0 or more", "A number >= 0 (weight decay, L2).")
fraction = _checked(float, lambda v: 0 <= v <= 1, "between 0 and 1",
                    "A number in [0, 1] (warm-up proportion, masking and short-sequence probabilities).")
