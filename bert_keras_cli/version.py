"""`bert-keras --version`: bert-keras's, TensorFlow's and Keras's versions on one line, read without importing
TensorFlow (the import alone takes seconds; this takes milliseconds)."""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util

# The distributions that install each import name (the first one installed wins).
DISTRIBUTIONS = {"TensorFlow": ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"),
                 "Keras": ("keras", "keras-nightly")}


def bert_keras_version() -> str:
    """bert_keras.__version__, read from bert_keras/__init__.py's source (as setup.cfg's `attr:` reads it) without
    running it, since it imports TensorFlow."""
    spec = importlib.util.find_spec("bert_keras")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    return "unknown"


def installed_version(names) -> str:
    """The version of the first of the distributions `names` installed, else "not installed"."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return "not installed"


def version_line() -> str:
    """One line: bert-keras's version, then TensorFlow's and Keras's.

    Example:
        >>> version_line()   # doctest: +SKIP
        'bert-keras 0.1.0 (TensorFlow 2.20.0, Keras 3.15.1)'
    """
    others = ", ".join(f"{what} {installed_version(names)}" for what, names in DISTRIBUTIONS.items())
    return f"bert-keras {bert_keras_version()} ({others})"


class VersionAction(argparse.Action):
    """argparse's --version, with the line computed only when the flag is given."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()
