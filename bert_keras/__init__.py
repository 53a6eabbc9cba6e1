"""bert_keras: BERT for Keras 3 and TensorFlow, from raw text to TF Serving."""

import os as _os

# Keras' backend, fixed when Keras loads: KERAS_BACKEND when set; else JAX on a TPU VM without TensorFlow's TPU
# build (Colab's and Kaggle's TPUs today: backend_route.py), else TensorFlow.
if "KERAS_BACKEND" not in _os.environ:
    from bert_keras.backend_route import default_backend as _default_backend
    _os.environ["KERAS_BACKEND"], _why = _default_backend()
    if _why:
        print(f"bert_keras: {_why}", flush=True)
# oneDNN's CPU kernels on (docs/performance.md: fine-tuning steps); only before TensorFlow loads, and
# TF_ENABLE_ONEDNN_OPTS=0 keeps them off.
_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
# A library user's process: TensorFlow's C++ INFO lines (e.g. "Local rendezvous is aborting ... End of sequence"
# after every tf.data pass) off, warnings and errors still print (only if TensorFlow loads after this), but for
# the "failed call to cuInit" of a machine without a GPU driver (backends.find_devices_quietly, below). The
# `bert-keras` command sets 3 before, with Abseil's lines to match (bert_keras_cli/absl_logs.py). Set
# TF_CPP_MIN_LOG_LEVEL to override either: then TensorFlow shows what that level shows.
_default_log_level = "TF_CPP_MIN_LOG_LEVEL" not in _os.environ
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from bert_keras.config import PRESETS, BertConfig, preset_config  # noqa: E402
from bert_keras.encoder import BertEncoder  # noqa: E402
from bert_keras.checkpoints import load_checkpoint, read_checkpoint, save_google_checkpoint  # noqa: E402
from bert_keras.preprocessing import BertPreprocessor  # noqa: E402
from bert_keras.zoo import from_preset  # noqa: E402
import bert_keras.tasks  # noqa: E402,F401  (registers the task models and the optimizer schedule for load_model)
from bert_keras.tasks import load_task_model  # noqa: E402
import bert_keras.training  # noqa: E402,F401
from bert_keras.backends import find_devices_quietly as _find_devices  # noqa: E402
from bert_keras.backends import hide_accelerators_from_tensorflow as _hide  # noqa: E402

if _default_log_level:
    _find_devices()    # TensorFlow's devices now, without the no-GPU-driver line (else at the first op, with it)
_hide()            # on JAX the TPU (or GPUs) belong to JAX; the host's TensorFlow only tokenizes

__all__ = ["BertConfig", "BertEncoder", "BertPreprocessor", "PRESETS", "from_preset", "load_checkpoint", "load_task_model", "preset_config", "read_checkpoint",
           "save_google_checkpoint"]
__version__ = "0.1.0"
