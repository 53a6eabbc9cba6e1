"""fill_mask against transformers' own `pipeline("fill-mask")`: on a BertForMaskedLM transformers builds (seeded
random init, save_pretrained), and on a bert_tiny that `bert-keras pretrain` trained, converted to a Hugging Face
folder by `bert-keras convert --hf-out` and read back. Same top-5 tokens, probabilities within 1e-5, on texts
with one and with two masks; the exported SavedModel gives the same on TF Serving's session path."""

import shutil

import numpy as np
import pytest

from conftest import FIXTURES
from session_path import run_signatures

pytestmark = pytest.mark.torch

TEXTS = ["The capital of France is [MASK].", "A [MASK] sat on the [MASK], purring.",
         "Ünïcödé [MASK] text, “quoted”."]


def hf_folder(minilm_vocab, model_folder):
    """A folder with the model and the MiniLM vocabulary's BertTokenizerFast (transformers' fill-mask tokenizer)."""
    from transformers import BertTokenizerFast
    BertTokenizerFast(minilm_vocab, do_lower_case=True).save_pretrained(model_folder)
    shutil.copyfile(minilm_vocab, f"{model_folder}/vocab.txt")
    return model_folder


def pipeline_answers(folder, texts, top_k=5):
    """Per text, per mask: [(token id, probability)] from transformers' fill-mask pipeline."""
    from transformers import pipeline
    fill = pipeline("fill-mask", model=folder, tokenizer=folder, top_k=top_k, device="cpu")
    out = []
    for text in texts:
        answers = fill(text)
        answers = [answers] if isinstance(answers[0], dict) else answers          # one mask: a flat list
        out.append([[(a["token"], a["score"]) for a in mask] for mask in answers])
    return out


def assert_same_answers(ours, theirs):
    assert len(ours) == len(theirs)
    for our_text, their_text in zip(ours, theirs):
        assert len(our_text) == len(their_text)
        for our_mask, their_mask in zip(our_text, their_text):
            assert [a["id"] for a in our_mask] == [t for t, _ in their_mask]
            np.testing.assert_allclose([a["probability"] for a in our_mask], [p for _, p in their_mask], atol=1e-5)


@pytest.fixture(scope="module")
def transformers_mlm(tmp_path_factory, minilm_vocab):
    """A BertForMaskedLM transformers builds, seeded; the output bias is spread (N(0, 2)) so the top tokens are
    well apart, as in a trained model, instead of a near-uniform random init."""
    import torch
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=128)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_(0.0, 2.0)
    folder = str(tmp_path_factory.mktemp("hf_mlm"))
    model.save_pretrained(folder)
    return hf_folder(minilm_vocab, folder)


def test_fill_mask_equals_the_transformers_pipeline(transformers_mlm, tmp_path):
    from bert_keras.tasks import load_masked_lm
    from savedmodels.export import export_for_serving
    model = load_masked_lm(transformers_mlm)
    theirs = pipeline_answers(transformers_mlm, TEXTS)
    ours = model.fill_mask(TEXTS, top_k=5)
    assert_same_answers(ours, theirs)
    # The export's serving signature on TF Serving's path (the TF1 loader, Session.run on the SignatureDef).
    written = export_for_serving(model, str(tmp_path / "serving"), "mlm")
    served = run_signatures([{"path": written.version, "signature": "serving_default", "inputs": {"text": TEXTS}}])[0]
    for row, their_text in enumerate(theirs):
        assert served["mask_count"][row] == len(their_text)
        for m, their_mask in enumerate(their_text):
            assert served["token_ids"][row][m] == [t for t, _ in their_mask]
            np.testing.assert_allclose(served["probabilities"][row][m], [p for _, p in their_mask], atol=1e-5)


def test_a_pretrained_bert_tiny_fills_as_transformers_does_both_ways(tmp_path, minilm_vocab):
    from bert_keras.pretraining import PretrainConfig, pretrain
    from bert_keras.tasks import load_masked_lm
    from bert_keras_cli.main import main
    out = tmp_path / "pretrained"
    pretrain(PretrainConfig(model="bert_tiny", vocab=minilm_vocab, out=str(out),
                            text=str(FIXTURES / "pretraining_corpus.txt"), max_seq_length=64,
                            max_predictions_per_seq=10, train_steps=30, save_every=30, batch_size=16,
                            learning_rate=2e-3, warmup_steps=3, progress=False))
    hf = tmp_path / "hf"
    assert main(["convert", "--checkpoint", str(out / "tf1_checkpoint"), "--hf-out", str(hf)]) == 0
    hf_folder(minilm_vocab, str(hf))
    theirs = pipeline_answers(str(hf), TEXTS)
    assert_same_answers(load_masked_lm(str(out)).fill_mask(TEXTS), theirs)        # bert-keras pretrain's output
    assert_same_answers(load_masked_lm(str(hf)).fill_mask(TEXTS), theirs)         # and back from the HF folder


def test_a_folder_transformers_saved_without_vocab_txt_fills_the_same(transformers_mlm, tmp_path):
    """transformers 5's save_pretrained writes tokenizer.json and no vocab.txt: the vocabulary and casing come
    from tokenizer.json, with the pipeline's answers."""
    from bert_keras.tasks import load_masked_lm
    folder = tmp_path / "no_vocab_txt"
    shutil.copytree(transformers_mlm, folder, ignore=shutil.ignore_patterns("vocab.txt"))
    assert "tokenizer.json" in {p.name for p in folder.iterdir()}
    assert_same_answers(load_masked_lm(str(folder)).fill_mask(TEXTS), pipeline_answers(transformers_mlm, TEXTS))
