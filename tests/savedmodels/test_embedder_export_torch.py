"""Embedders and rerankers on TF Serving's session path against sentence-transformers 6.2 itself (issue 56,
torch tier). Three folders, each exported once with `bert-keras export --model <folder>` and run the way TF
Serving runs them (session_path.py, one subprocess for all):

- the real all-MiniLM-L6-v2 folder as it ships (mean pooling, Normalize, max_seq_length 256);
- a folder sentence-transformers 6.2 saves itself from the MiniLM weights: CLS pooling, max_seq_length 64,
  Normalize, prompts {"query": "query: ", "passage": "passage: "};
- a CrossEncoder folder (CrossEncoder(minilm, num_labels=1).save: a seeded, untrained head, sigmoid activation).

Every embedder signature (serving_default and one per prompt) equals SentenceTransformer(folder).encode(texts,
prompt_name=...) within 1e-5, the texts holding one longer than max_seq_length and the empty string; the
CrossEncoder's serving score equals CrossEncoder.predict (and its logits the activation-free predict) within 1e-5."""

import numpy as np
import pytest

from bert_keras_cli.main import main
from session_path import run_signatures

pytestmark = pytest.mark.torch

TEXTS = ["A man is playing a guitar.", "", "Ünïcödé — “quoted” text",
         " ".join(["the long review goes on and on"] * 20)]                # 140 words: over 64 and under 256 tokens
PROMPTS = {"query": "query: ", "passage": "passage: "}


def close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm_dir):
    """{name: (sentence-transformers model, the session path's answers {signature: outputs})}."""
    import torch
    from sentence_transformers import CrossEncoder, SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    folder = tmp_path_factory.mktemp("st")
    cls = SentenceTransformer(modules=[Transformer(minilm_dir, max_seq_length=64), Pooling(384, pooling_mode="cls"),
                                       Normalize()], prompts=PROMPTS, device="cpu")
    cls.save(str(folder / "cls"))
    torch.manual_seed(0)
    CrossEncoder(minilm_dir, num_labels=1, device="cpu").save(str(folder / "cross"))
    sources = {"minilm": minilm_dir, "cls": str(folder / "cls"), "cross": str(folder / "cross")}
    base = folder / "serving"
    for name, source in sources.items():
        assert main(["export", "--model", source, "--base-path", str(base), "--name", name]) == 0
    pairs = (TEXTS, TEXTS[::-1])
    calls = [("minilm", "serving_default", {"text": TEXTS}), ("cls", "serving_default", {"text": TEXTS}),
             *[("cls", name, {"text": TEXTS}) for name in cls.prompts],      # with any prompt 6.2 adds itself
             ("cross", "serving_default", {"text_a": pairs[0], "text_b": pairs[1]})]
    got = run_signatures([{"path": str(base / name / "1"), "signature": s, "inputs": i} for name, s, i in calls])
    answers = {}
    for (name, signature, _), out in zip(calls, got):
        answers.setdefault(name, {})[signature] = out
    return {"minilm": (SentenceTransformer(minilm_dir, device="cpu"), answers["minilm"]),
            "cls": (SentenceTransformer(str(folder / "cls"), device="cpu"), answers["cls"]),
            "cross": (CrossEncoder(str(folder / "cross"), device="cpu"), answers["cross"])}


def test_real_minilm_folder_equals_sentence_transformers(served):
    st, got = served["minilm"]
    assert st.max_seq_length == 256
    close(got["serving_default"]["embedding"], st.encode(TEXTS))


def test_cls_folder_with_prompts_equals_sentence_transformers(served):
    st, got = served["cls"]
    assert st.max_seq_length == 64 and st.prompts == {**st.prompts, **PROMPTS}
    assert len(st.tokenizer(TEXTS[-1])["input_ids"]) > 64                  # the long text is truncated
    assert set(got) == {"serving_default", *st.prompts}
    close(got["serving_default"]["embedding"], st.encode(TEXTS))
    for name in st.prompts:
        close(got[name]["embedding"], st.encode(TEXTS, prompt_name=name))
    for name in PROMPTS:                                                   # the prompt changes the embedding
        assert np.abs(st.encode(TEXTS, prompt_name=name) - st.encode(TEXTS)).max() > 1e-3


def test_cross_encoder_folder_score_equals_predict(served):
    import torch
    ce, got = served["cross"]
    pairs = list(zip(TEXTS, TEXTS[::-1]))
    close(got["serving_default"]["score"], ce.predict(pairs))
    close(np.asarray(got["serving_default"]["logits"])[:, 0], ce.predict(pairs, activation_fn=torch.nn.Identity()))
