"""Embedders and rerankers as TF Serving models (issue 56), unit tier: `bert-keras export` (in this process) of the
real all-MiniLM-L6-v2 folder as it ships, of a bert_tiny BertEmbedder .keras with prompts (one of them empty) and
include_prompt=False, and of a bert_tiny BertReranker .keras, run the way TF Serving runs them (session_path.py:
the TF1 loader + Session.run in a process importing only tensorflow and tensorflow_text). Every signature equals
the model's own `encode(texts, prompt_name=...)` (the reranker: `predict(pairs)` and its logits) within 1e-5.
Also `predict --signature <prompt>` through the local server, and `bert-keras embed` (--model, --prompt-name).
The comparison with sentence-transformers itself is test_embedder_export_torch.py (torch tier)."""

import json
import re

import keras
import numpy as np
import pytest

from bert_keras import BertEncoder, BertPreprocessor, preset_config
from bert_keras.tasks import BertEmbedder, BertReranker, load_task_model
from bert_keras_cli.main import main
from savedmodels import signatures as sig
from savedmodels.local_server import start_server
from session_path import run_signatures
from test_bad_input import assert_one_error_line, run_main

TEXTS = ["a fine film", "", "Ünïcödé — “quoted” text", "a long review " * 40]   # the last one over max_seq_length
PROMPTS = {"query": "query: ", "passage": "passage: ", "document": ""}


def close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, minilm_dir, minilm_vocab):
    """The three models, each exported once with `bert-keras export` under one base path, and the session path's
    answers to every signature of theirs."""
    keras.utils.set_random_seed(5)
    folder = tmp_path_factory.mktemp("embedders")
    pre = BertPreprocessor(minilm_vocab, max_seq_length=24)
    tiny = BertEmbedder(BertEncoder(preset_config("bert_tiny")), pooling=["cls", "mean"], include_prompt=False,
                        dense=[{"units": 8, "activation": "tanh"}], prompts=PROMPTS, default_prompt_name="query",
                        preprocessor=pre)
    reranker = BertReranker(BertEncoder(preset_config("bert_tiny")), preprocessor=pre)
    tiny.save(folder / "tiny.keras")
    reranker.save(folder / "reranker.keras")
    base = folder / "serving"
    sources = {"minilm": minilm_dir, "tiny": folder / "tiny.keras", "reranker": folder / "reranker.keras"}
    for name, source in sources.items():
        assert main(["export", "--model", str(source), "--base-path", str(base), "--name", name]) == 0
    models = {"minilm": load_task_model(minilm_dir), "tiny": tiny, "reranker": reranker}

    def ids(model, prompt=""):
        out = model.preprocessor([prompt + t for t in TEXTS])
        return {k: np.asarray(v).tolist() for k, v in out.items()}

    tiny_ids = {**ids(tiny, "passage: "), "prompt_length": [tiny.prompt_length("passage: ")] * len(TEXTS)}
    calls = {"minilm": {"signature": "serving_default", "inputs": {"text": TEXTS}},
             "minilm/from_ids": {"signature": "from_ids", "inputs": ids(models["minilm"])},
             "tiny": {"signature": "serving_default", "inputs": {"text": TEXTS}},
             "tiny/from_ids": {"signature": "from_ids", "inputs": tiny_ids},
             "reranker": {"signature": "serving_default", "inputs": {"text_a": TEXTS, "text_b": TEXTS[::-1]}},
             "reranker/regress": {"signature": "regress",
                                  "examples": [{"text_a": a, "text_b": b} for a, b in zip(TEXTS, TEXTS[::-1])]}}
    calls.update({f"tiny/{name}": {"signature": name, "inputs": {"text": TEXTS}} for name in PROMPTS})
    paths = {name: str(base / name / "1") for name in sources}
    got = dict(zip(calls, run_signatures([{"path": paths[k.split("/")[0]], **c} for k, c in calls.items()])))
    return {"base": base, "models": models, "got": got, "tiny_keras": folder / "tiny.keras", "paths": paths}


def test_minilm_folder_exports_text_to_its_encode(exported):
    """The folder as it ships (mean pooling, Normalize, max_seq_length 256 from sentence_bert_config.json)."""
    model, got = exported["models"]["minilm"], exported["got"]
    want = model.encode(TEXTS)
    assert want.shape == (4, 384)
    close(got["minilm"]["embedding"], want)
    close(got["minilm/from_ids"]["embedding"], want)
    np.testing.assert_allclose(np.linalg.norm(got["minilm"]["embedding"], axis=1), 1, atol=1e-5)


def test_each_prompt_is_a_signature_equal_to_encode_with_that_prompt(exported):
    model, got = exported["models"]["tiny"], exported["got"]
    for name in PROMPTS:
        close(got[f"tiny/{name}"]["embedding"], model.encode(TEXTS, prompt_name=name))
    # serving_default applies the default prompt ("query: "), as encode(texts) does; "" prepends nothing.
    close(got["tiny"]["embedding"], model.encode(TEXTS))
    close(got["tiny"]["embedding"], got["tiny/query"]["embedding"])
    close(got["tiny/document"]["embedding"], model.encode(TEXTS, prompt=""))
    assert np.abs(np.subtract(got["tiny/query"]["embedding"], got["tiny/document"]["embedding"])).max() > 1e-3
    # from_ids takes the prompt's length (include_prompt=False): the ids of "passage: " + text answer as "passage".
    close(got["tiny/from_ids"]["embedding"], model.encode(TEXTS, prompt_name="passage"))


def test_reranker_serves_pairs_with_score_after_the_sigmoid(exported):
    model, got = exported["models"]["reranker"], exported["got"]["reranker"]
    logits = np.asarray(model(model.preprocess((np.array(TEXTS), np.array(TEXTS[::-1])))))
    close(got["logits"], logits)
    close(got["score"], 1 / (1 + np.exp(-logits[:, 0].astype(np.float64))))
    close(got["score"], model.predict(list(zip(TEXTS, TEXTS[::-1]))))
    close(exported["got"]["reranker/regress"]["outputs"], got["score"])


def test_a_prompt_named_as_another_signature_is_refused(minilm_vocab):
    model = BertEmbedder(BertEncoder(preset_config("bert_tiny")), prompts={"from_ids": "x: "},
                         preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=16))
    with pytest.raises(ValueError, match="'from_ids' has the name of another signature"):
        sig.embedding(model)


def test_predict_takes_a_prompt_signature_through_the_local_server(exported, capsys):
    server, port = start_server({"tiny": str(exported["base"] / "tiny")}, poll_seconds=3600)
    try:
        argv = ["predict", "--server", f"127.0.0.1:{port}", "--model-name", "tiny", "--signature", "passage",
                "--input", "text=a fine film", "--input", "text="]
        code, out, err = run_main(argv, capsys)
    finally:
        server.stop()
    assert code == 0, err
    close(json.loads(out.strip().splitlines()[-1])["embedding"], exported["models"]["tiny"].encode(["a fine film", ""], prompt_name="passage"))


def printed_embedding(out: str) -> np.ndarray:
    return np.array([float(v) for v in re.search(r"embedding of .*: \[(.*), \.\.\.\]", out).group(1).split(", ")])


def test_embed_takes_a_model_and_a_prompt_name(exported, capsys):
    model = exported["models"]["tiny"]
    code, out, err = run_main(["embed", "--model", exported["tiny_keras"], "--prompt-name", "passage", "a fine film",
                               "a dull film", "a fine movie"], capsys)
    assert code == 0, err
    np.testing.assert_allclose(printed_embedding(out), model.encode("a fine film", prompt_name="passage")[:6],
                               atol=6e-5)
    assert "prompt 'passage: '" in out and len([line for line in out.splitlines() if "->" in line]) == 3
    argv = ["embed", "--model", exported["tiny_keras"], "--prompt-name", "title", "x"]
    assert_one_error_line(*run_main(argv, capsys), ["--prompt-name title", "query, passage, document"], argv)
    argv = ["embed", "--model", exported["tiny_keras"], "--cased", "x"]           # its own tokenizer: not ignored
    assert_one_error_line(*run_main(argv, capsys), ["--vocab and --cased", "leave them out"], argv)


def test_embed_of_an_encoder_checkpoint_mean_pools(minilm_vocab, capsys):
    code, out, err = run_main(["embed", "--model", "bert_tiny", "--vocab", minilm_vocab, "one sentence"], capsys)
    assert code == 0, err
    assert "mean pooling, not normalized" in out and "(128 values)" in out and "->" not in out


def test_embed_refuses_a_model_that_is_not_an_embedder(exported, capsys):
    argv = ["embed", "--model", exported["paths"]["reranker"].rsplit("/", 1)[0] + "/model.keras", "x"]
    assert_one_error_line(*run_main(argv, capsys), ["BertReranker", "not a sentence embedder"], argv)
