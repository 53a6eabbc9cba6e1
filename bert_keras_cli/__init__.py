"""`bert-keras`, the command line, and `bert-keras demo`: the one layer above both packages.

    bert_keras   the library (config, layers, preprocessing, tasks, training)
    savedmodels  TF Serving exports and the serving side, built on bert_keras
    bert_keras_cli  this package: thin commands over both (`bert_keras` never imports it or savedmodels)
"""

import os as _os
import sys as _sys


def _backend_from_command_line(argv) -> str | None:
    """`--backend NAME` (or `--backend=NAME`) among the arguments, else None."""
    for i, arg in enumerate(argv):
        if arg == "--backend" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--backend="):
            return arg.split("=", 1)[1]
    return None


# Keras fixes its backend when it is first imported. For the `bert-keras` command (not a program importing this
# package), before anything imports Keras: `--backend NAME` sets KERAS_BACKEND; the serving commands always run on
# TensorFlow (an export traces the model into a SavedModel graph, whatever backend trained it, and a notebook on JAX
# runs `bert-keras export` in a subprocess that inherits KERAS_BACKEND=jax).
_SERVING_COMMANDS = ("export", "export-hub", "serve", "predict")
_is_command = _os.path.basename(_sys.argv[0]) == "bert-keras" or _sys.argv[0].endswith(("bert_keras_cli/main.py",
                                                                                         "-m"))
_wanted = _backend_from_command_line(_sys.argv[1:]) if _is_command else None
if _wanted == "jax":
    import importlib.util as _util
    if _util.find_spec("jax") is None:
        _sys.exit("bert-keras: error: --backend jax needs JAX: pip install jax (on a TPU VM: pip install "
                  "'jax[tpu]')")
if _is_command and _wanted is None and len(_sys.argv) > 1 and _sys.argv[1] in _SERVING_COMMANDS:
    _wanted = "tensorflow"
if _wanted in ("tensorflow", "jax"):
    _os.environ["KERAS_BACKEND"] = _wanted
