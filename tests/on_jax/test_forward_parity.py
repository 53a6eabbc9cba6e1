"""The same weights on JAX and on TensorFlow: the real all-MiniLM-L6-v2 encoder's hidden states and each task
kind's outputs on the same raw texts agree within 1e-5 (issue 41's forward parity). The models are built and saved
here on TensorFlow (whose outputs match PyTorch transformers', tests/test_encoder.py), loaded from the `.keras`
files in a JAX process, which answers the same texts through the same public methods."""

import json

import keras
import numpy as np
import pytest

from backend_process import assert_close_at_real_positions, run_on_backend

pytestmark = pytest.mark.jax

SENTENCES = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "ok",
             "An extraordinarily long-winded, self-indulgent exercise in style over substance that never ends."]
QUESTIONS = ["Who wrote it?", "When was it written?"]
CONTEXTS = ["It was written by Ada Lovelace in 1843, long before computers existed.", "In 1843."]
MC_CONTEXTS = ["The man opened the door", "She poured the tea"]
ENDINGS = [["and walked in.", "and flew to the moon.", "quietly.", "then sat."],
           ["into a cup.", "on the floor of the sea.", "and drank it.", "slowly and carefully."]]
POSITIONS = np.array([[1, 2, 0], [3, 1, 2]], "int32")
MASKED = ["the capital of france is [MASK] .", "a [MASK] and often [MASK] journey .", "Ünï [MASK]"]

JAX_SIDE = """
import json, sys
import numpy as np, keras, bert_keras
assert keras.backend.backend() == "jax"
args = json.load(open(sys.argv[1] if len(sys.argv) > 1 else {args!r}))
load = lambda name: keras.models.load_model(f"{{args['folder']}}/{{name}}.keras")
out = {{}}
encoder = load("encoder")
pre = load("classifier").preprocessor
ids = {{k: np.asarray(v) for k, v in pre(args["sentences"]).items()}}
hidden = encoder(ids)
for i, h in enumerate(hidden["encoder_outputs"]):
    out[f"encoder_{{i}}"] = np.asarray(h)
out["pooled"] = np.asarray(hidden["pooled_output"])
out["mask"] = ids["input_mask"]
for k, v in load("classifier").serve_numpy(args["sentences"]).items():
    out[f"classifier_{{k}}"] = v
for k, v in load("pairs").serve_numpy(args["sentences"][:2], args["sentences"][2:4]).items():
    out[f"pairs_{{k}}"] = v
for k, v in load("span").serve_numpy(args["questions"], args["contexts"]).items():
    out[f"span_{{k}}"] = v
for k, v in load("choice").serve_numpy(args["mc_contexts"], args["endings"]).items():
    out[f"choice_{{k}}"] = v
for k, v in load("tagger").serve_numpy(args["sentences"]).items():
    out[f"tagger_{{k}}"] = v
for k, v in load("masked_lm").serve_numpy(args["masked"]).items():
    out[f"masked_lm_{{k}}"] = v
out["masked_lm_fill"] = np.array([a["token"] for text in load("masked_lm").fill_mask(args["masked"])
                                  for mask in text for a in mask], object)
pretrainer = load("pretrainer")
batch = {{**{{k: v[:2] for k, v in ids.items()}}, "masked_lm_positions": np.asarray(args["positions"], "int32")}}
for k, v in pretrainer(batch).items():
    out[f"pretrainer_{{k}}"] = np.asarray(v)
np.savez(args["out"], **{{k: v for k, v in out.items() if v.dtype.kind not in "OSU"}})
json.dump({{k: [x.decode() if isinstance(x, bytes) else x for x in v.ravel().tolist()]
           for k, v in out.items() if v.dtype.kind in "OSU"}}, open(args["out"] + ".json", "w"))
"""


@pytest.fixture(scope="module")
def both_backends(tmp_path_factory, minilm_dir):
    """(TensorFlow outputs, JAX outputs, the TensorFlow side's string outputs, JAX's) for one set of models."""
    from bert_keras.loading import load_backbone
    from bert_keras.tasks import (BertClassifier, BertMaskedLM, BertMultipleChoice, BertPretrainer, BertSpanLabeler,
                                  BertTagger)
    folder = tmp_path_factory.mktemp("parity")
    keras.utils.set_random_seed(3)
    encoder, pre = load_backbone(minilm_dir, max_seq_length=64)
    models = {"classifier": BertClassifier(encoder, 3, label_names=["a", "b", "c"], preprocessor=pre),
              "pairs": BertClassifier(encoder, 2, preprocessor=pre, segments=2),
              "span": BertSpanLabeler(encoder, pre, doc_stride=16, max_query_length=8),
              "choice": BertMultipleChoice(encoder, preprocessor=pre),
              "tagger": BertTagger(encoder, 5, label_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
                                   preprocessor=pre),
              "pretrainer": BertPretrainer(encoder),
              "masked_lm": BertMaskedLM(encoder, preprocessor=pre)}
    encoder.save(folder / "encoder.keras")
    for name, model in models.items():
        model.save(folder / f"{name}.keras")
    tf_out = {}
    ids = {k: v.numpy() for k, v in pre(SENTENCES).items()}
    hidden = encoder(ids)
    tf_out.update({f"encoder_{i}": h.numpy() for i, h in enumerate(hidden["encoder_outputs"])})
    tf_out["pooled"], tf_out["mask"] = hidden["pooled_output"].numpy(), ids["input_mask"]
    answers = {"classifier": models["classifier"].serve_numpy(SENTENCES),
               "pairs": models["pairs"].serve_numpy(SENTENCES[:2], SENTENCES[2:4]),
               "span": models["span"].serve_numpy(QUESTIONS, CONTEXTS),
               "choice": models["choice"].serve_numpy(MC_CONTEXTS, ENDINGS),
               "tagger": models["tagger"].serve_numpy(SENTENCES),
               "masked_lm": models["masked_lm"].serve_numpy(MASKED)}
    answers["masked_lm"]["fill"] = np.array([a["token"] for text in models["masked_lm"].fill_mask(MASKED)
                                             for mask in text for a in mask], object)
    batch = {**{k: v[:2] for k, v in ids.items()}, "masked_lm_positions": POSITIONS}
    answers["pretrainer"] = {k: v.numpy() for k, v in models["pretrainer"](batch).items()}
    for name, outputs in answers.items():
        tf_out.update({f"{name}_{k}": v for k, v in outputs.items()})
    args = {"folder": str(folder), "out": str(folder / "jax.npz"), "sentences": SENTENCES, "questions": QUESTIONS,
            "contexts": CONTEXTS, "mc_contexts": MC_CONTEXTS, "endings": ENDINGS, "positions": POSITIONS.tolist(),
            "masked": MASKED}
    (folder / "args.json").write_text(json.dumps(args))
    run_on_backend(JAX_SIDE.format(args=str(folder / "args.json")))
    jax_out = dict(np.load(folder / "jax.npz"))
    jax_out.update({k: np.array(v, object) for k, v in json.loads((folder / "jax.npz.json").read_text()).items()})
    return tf_out, jax_out


def test_encoder_hidden_states_match_on_jax(both_backends):
    tf_out, jax_out = both_backends
    real = tf_out["mask"].astype(bool)
    np.testing.assert_array_equal(jax_out["mask"], tf_out["mask"])
    for i in range(6):                                        # MiniLM's 6 layers, at the real tokens
        np.testing.assert_allclose(jax_out[f"encoder_{i}"][real], tf_out[f"encoder_{i}"][real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(jax_out["pooled"], tf_out["pooled"], atol=1e-5, rtol=0)
    assert real.sum() > 40 and (~real).sum() > 20            # padding is present, and skipped by the comparison


@pytest.mark.parametrize("kind", ["classifier", "pairs", "span", "choice", "tagger", "pretrainer", "masked_lm"])
def test_task_outputs_match_on_jax(both_backends, kind):
    tf_out, jax_out = both_backends
    names = [k for k in tf_out if k.startswith(kind + "_")]
    assert names
    for name in names:
        ours, theirs = np.asarray(tf_out[name]), jax_out[name]
        if ours.dtype.kind in "OSU":                     # labels, answer texts, endings, tokens: the same strings
            assert [x.decode() if isinstance(x, bytes) else x for x in ours.ravel()] == list(theirs), name
        elif ours.dtype.kind == "f":
            assert_close_at_real_positions(ours, theirs, name)
        else:
            np.testing.assert_array_equal(theirs, ours, err_msg=name)
