"""BertMaskedLM: literal [MASK] tokenizes as transformers' tokenizer does, fill_mask's answers and errors, the
masked-LM head from every source (google-research checkpoint, Hugging Face folder, pretrainer, .keras), the
CLI, and the export on TF Serving's session path. (Against transformers' fill-mask pipeline: the torch tier,
test_fill_mask_torch.py.)"""

import json

import keras
import numpy as np
import pytest

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.tasks import BertMaskedLM, BertPretrainer, load_masked_lm
from bert_keras.tasks.masked_lm import tokenize_keeping_masks
from bert_keras_cli.main import main
from session_path import run_signatures

MASKED = ["Paris is the [MASK] of France.", "[MASK]", "x[MASK][MASK]y", "a [MASK] b [MASK]. Ünïcödé [MASK]",
          "", "no mask here", "[mask] stays text"]


@pytest.fixture(scope="module")
def model(minilm_vocab):
    keras.utils.set_random_seed(3)
    pretrainer = BertPretrainer(BertEncoder(PRESETS["bert_tiny"]))
    out = BertMaskedLM(pretrainer.encoder, BertPreprocessor(minilm_vocab, max_seq_length=32), top_k=4)
    out.mlm_head.output_bias.assign(np.random.default_rng(0).normal(0, 2, 30522))    # well-separated top tokens
    return out


def test_literal_mask_gives_the_mask_id_as_transformers_tokenizer(hf_tokenizer, minilm_vocab):
    pre = BertPreprocessor(minilm_vocab)
    ours = tokenize_keeping_masks(pre.tokenize, MASKED, 103).to_list()
    theirs = [hf_tokenizer.encode(text, add_special_tokens=False).ids for text in MASKED]
    assert ours == theirs
    assert ours[2] == theirs[2] == [1060, 103, 103, 1061]


def test_fill_mask_gives_top_k_per_mask_left_to_right(model):
    texts = ["The [MASK] sat on the [MASK].", "a [MASK] b"]
    answers = model.fill_mask(texts, top_k=3)
    assert [len(masks) for masks in answers] == [2, 1] and all(len(a) == 3 for m in answers for a in m)
    ids = model.preprocess(texts)
    logits = np.asarray(model(ids))                                        # [B, P, V] at the masks
    for row, masks in enumerate(answers):
        for m, top in enumerate(masks):
            probabilities = np.exp(logits[row, m] - logits[row, m].max())
            probabilities /= probabilities.sum()
            assert [a["id"] for a in top] == list(np.argsort(-probabilities)[:3])
            np.testing.assert_allclose([a["probability"] for a in top], np.sort(probabilities)[::-1][:3], atol=1e-6)
    assert answers[0][1][0]["sequence"] == "The [MASK] sat on the " + answers[0][1][0]["token"].removeprefix("##") + "."


def test_bad_texts_are_named(model):
    with pytest.raises(ValueError, match="no \\[MASK\\] in 'no mask'"):
        model.fill_mask(["no mask"])
    with pytest.raises(ValueError, match="past max_seq_length"):
        model.fill_mask(["word " * 40 + "[MASK]"])


def test_keras_round_trip_and_every_source_of_the_head(model, minilm_vocab, tmp_path):
    from bert_keras.checkpoints import save_google_checkpoint
    from bert_keras.checkpoints.huggingface import write_huggingface
    from bert_keras.checkpoints.names import encoder_weights
    want = model.fill_mask(["a [MASK] b"], top_k=4)
    model.save(tmp_path / "mlm.keras")
    loaded = keras.models.load_model(tmp_path / "mlm.keras")
    assert [a["id"] for a in loaded.fill_mask(["a [MASK] b"])[0][0]] == [a["id"] for a in want[0][0]]
    heads = {k: np.asarray(v) for k, v in model.mlm_head.checkpoint_variables().items()}
    save_google_checkpoint(model.encoder, str(tmp_path / "google"), vocab_file=minilm_vocab, heads=heads)
    write_huggingface({**encoder_weights(model.encoder), **heads}, str(tmp_path / "hf"), model.encoder.config,
                      vocab_file=minilm_vocab)
    for source in (tmp_path / "mlm.keras", tmp_path / "google", tmp_path / "hf"):
        got = load_masked_lm(str(source)).fill_mask(["a [MASK] b"], top_k=4)
        assert [a["id"] for a in got[0][0]] == [a["id"] for a in want[0][0]], source
        np.testing.assert_allclose([a["probability"] for a in got[0][0]], [a["probability"] for a in want[0][0]],
                                   atol=1e-6)
    model.encoder.save(tmp_path / "encoder.keras")
    with pytest.raises(ValueError, match="has no masked-LM head"):
        load_masked_lm(str(tmp_path / "encoder.keras"), vocab=minilm_vocab)


def test_cli_prints_json_and_saves_a_model_that_exports(model, minilm_vocab, tmp_path, capsys):
    from savedmodels.export import export_for_serving
    model.save(tmp_path / "mlm.keras")
    assert main(["fill-mask", "--model", str(tmp_path / "mlm.keras"), "--top-k", "2", "--json",
                 "--save", str(tmp_path / "again.keras"), "A [MASK] b [MASK]."]) == 0
    printed = json.loads(capsys.readouterr().out.splitlines()[0])
    direct = model.fill_mask(["A [MASK] b [MASK]."], top_k=2)
    assert [[[a["id"] for a in m] for m in t] for t in printed] == [[[a["id"] for a in m] for m in t] for t in direct]
    assert set(printed[0][0][0]) == {"token", "id", "probability"}
    assert main(["fill-mask", "--model", str(tmp_path / "mlm.keras"), "nothing to fill"]) == 2
    assert "put [MASK] where" in capsys.readouterr().err
    assert main(["fill-mask", "--model", str(tmp_path / "mlm.keras")]) == 2
    # The export (serving_default: text -> top_k per mask) on TF Serving's session path.
    texts = ["The [MASK] is [MASK].", "[MASK]!", "no mask"]
    written = export_for_serving(keras.models.load_model(tmp_path / "again.keras"), str(tmp_path / "serving"), "mlm")
    served = run_signatures([{"path": written.version, "signature": "serving_default", "inputs": {"text": texts}}])[0]
    assert served["mask_count"] == [2, 1, 0]
    want = model.fill_mask(texts[:2], top_k=2)           # the --top-k the saved model was made with
    for row, masks in enumerate(want):
        for m, top in enumerate(masks):
            assert served["token_ids"][row][m] == [a["id"] for a in top]
            np.testing.assert_allclose(served["probabilities"][row][m], [a["probability"] for a in top], atol=1e-6)
