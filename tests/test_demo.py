"""`bert-keras demo` prints only its own lines: its serving step (demo.ask_local_server: the local gRPC server's
first Session.run, then a Predict) runs in a new process set up as the command sets up its own (main():
absl_logs.quiet_tensorflow_logs, TF_CPP_MIN_LOG_LEVEL unset), and its stderr holds no line of TensorFlow's logging:
neither of the two Abseil lines TensorFlow 2.20 writes there (bert_keras_cli/absl_logs.py) nor the cuInit error of
a machine without CUDA. The same step through the library's own start_server still writes them: the switch is the
command's, not the library user's, and the check below is one that fails when the switch does nothing. Mutation
check: set_absl_min_log_level doing nothing fails the serving step's (the cuInit line is also dropped by the
library itself when TF_CPP_MIN_LOG_LEVEL is unset: tests/test_imports.py). (finetune, export and serve run as
commands in test_readme.py, with the same check on their stderr: that covers main() calling quiet_tensorflow_logs.)"""

import subprocess
import sys

import keras
import pytest

from conftest import REPO
from tensorflow_log_lines import command_env, tensorflow_log_lines

pytestmark = pytest.mark.integration

ABSL_LINES = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
              "MLIR V1 optimization pass is not enabled")

SERVE = """
import sys
if sys.argv[2] == "demo":                 # as bert-keras's main() sets up the command's process
    from bert_keras_cli.absl_logs import quiet_tensorflow_logs
    quiet_tensorflow_logs()
from bert_keras_cli import demo
if sys.argv[2] == "demo":
    port, outputs = demo.ask_local_server(sys.argv[1], ["a fine film", "dull"])
else:                                     # the library's server, as a user's program starts it
    from savedmodels.client import ServingClient
    from savedmodels.local_server import start_server
    server, port = start_server({"sentiment": sys.argv[1]})
    outputs = ServingClient(f"127.0.0.1:{port}", "sentiment").predict({"text": ["a fine film", "dull"]})
    server.stop(0)
print("labels:", *sorted(label.decode() for label in outputs["label"]), flush=True)
"""


@pytest.fixture(scope="module")
def served_model(tmp_path_factory, minilm_vocab):
    from bert_keras.config import PRESETS
    from bert_keras.encoder import BertEncoder
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.tasks import BertClassifier
    from savedmodels.export import export_task_model
    base = tmp_path_factory.mktemp("serving")
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, label_names=["negative", "positive"],
                           preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=32))
    export_task_model(model, str(base), "sentiment", keras_file=False)
    return str(base / "sentiment")


def serve(model: str, how: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-c", SERVE, model, how], capture_output=True, text=True, cwd=REPO,
                            env=command_env(), timeout=600)          # as a user's shell runs `bert-keras demo`
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[0] == "labels:" and len(result.stdout.split()) == 3    # both answered
    return result


def test_the_demos_serving_step_writes_no_tensorflow_log_line(served_model):
    stderr = serve(served_model, "demo").stderr
    assert not [line for line in stderr.splitlines() if any(text in line for text in ABSL_LINES)], stderr
    assert tensorflow_log_lines(stderr) == [], stderr


def test_the_library_server_is_left_to_tensorflows_defaults(served_model):
    stderr = serve(served_model, "library").stderr
    assert all(text in stderr for text in ABSL_LINES), ("TensorFlow no longer writes the lines this test looks "
                                                        "for: update ABSL_LINES\n" + stderr[-3000:])


CUINIT = "failed call to cuInit"
FIRST_OP = """
import sys
if sys.argv[1] == "demo":                 # as bert-keras's main() sets up the command's process
    from bert_keras_cli.absl_logs import quiet_tensorflow_logs
    quiet_tensorflow_logs()
import bert_keras, tensorflow as tf
print(int(tf.constant(1) + 1))
"""


def first_op(how: str) -> str:
    # As a user's shell runs `bert-keras demo`; the library's process at TensorFlow's level 1 set by its user (the
    # library, left at its default, drops the cuInit line itself: backends.find_devices_quietly).
    env = command_env(**({"TF_CPP_MIN_LOG_LEVEL": "1"} if how == "library" else {}))
    result = subprocess.run([sys.executable, "-c", FIRST_OP, how], capture_output=True, text=True, cwd=REPO,
                            env=env, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "2", result.stderr[-3000:]
    return result.stderr


def test_the_demo_hides_tensorflows_cuinit_error_on_a_machine_without_cuda():
    """A process at TensorFlow's level 1 on a machine without a CUDA driver gets its "failed call to cuInit" E-line
    at its first op (tensorflow/tensorflow#37689; here and on CI); the demo's process does not."""
    library = first_op("library")
    if CUINIT not in library:
        pytest.skip("this machine's TensorFlow does not log the cuInit error (a CUDA driver is present)")
    assert tensorflow_log_lines(first_op("demo")) == []
