"""One `.keras` across backends (issue 41, item 3): every task kind fine-tuned and saved on JAX loads in this
TensorFlow process with the same outputs, exports with `export_for_serving`, and answers a raw-text request on TF
Serving's load path (tests/session_path.py: the TF1 loader and session.run on the SignatureDef) as the JAX model
did. The JAX side trains through the public raw-text `fit` (host tf.data preprocessing, XLA step)."""

import json
import sys

import keras
import numpy as np
import pytest

from backend_process import assert_close_at_real_positions, run_script
from session_path import run_signatures

pytestmark = pytest.mark.jax

TEXTS = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "ok"]
QUESTIONS, CONTEXTS = ["Who wrote it?", "Où ?"], ["It was written by Ann Smith in 1990, in Zürich. " * 3, "À Paris."]
MC_CONTEXT, MC_ENDINGS = ["A man sits at a piano.", "She poured"], [["He plays.", "He eats it."], ["tea.", "a sea."]]
NER_TEXTS = ["Angela Merkel visited Zürich .", "Ada Lovelace wrote it"]
REQUESTS = {
    "sst2": {"text": TEXTS},
    "mrpc": {"text_a": TEXTS, "text_b": TEXTS[::-1]},
    "stsb": {"text_a": TEXTS, "text_b": TEXTS[::-1]},
    "squad": {"question": QUESTIONS, "context": CONTEXTS},
    "swag": {"context": MC_CONTEXT, "endings": MC_ENDINGS},
    "ner": {"text": NER_TEXTS},
}

JAX_SIDE = """
import json, sys
import numpy as np, keras
import bert_keras
from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger
assert keras.backend.backend() == "jax"
folder, vocab = sys.argv[1], sys.argv[2]
requests = json.load(open(folder + "/requests.json"))
keras.utils.set_random_seed(0)
pre = BertPreprocessor(vocab, max_seq_length=64)
encoder = lambda: BertEncoder(PRESETS["bert_tiny"])
texts = requests["sst2"]["text"]
models = {
    "sst2": (BertClassifier(encoder(), 2, label_names=["neg", "pos"], preprocessor=pre), texts, [0, 1, 0, 1]),
    "mrpc": (BertClassifier(encoder(), 2, preprocessor=pre, segments=2), (texts, texts[::-1]), [1, 0, 1, 0]),
    "stsb": (BertClassifier(encoder(), 1, preprocessor=pre, segments=2), (texts, texts[::-1]), [0.5, 4.0, 2.0, 1.0]),
    "squad": (BertSpanLabeler(encoder(), pre, doc_stride=16, max_query_length=8),
              (requests["squad"]["question"], requests["squad"]["context"]), ([18, -1], [27, -1])),
    "swag": (BertMultipleChoice(encoder(), preprocessor=pre), (requests["swag"]["context"], requests["swag"]["endings"]),
             [0, 0]),
    "ner": (BertTagger(encoder(), 5, label_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], preprocessor=pre),
            [["Angela", "Merkel", "visited", "Zürich", "."], ["Ada", "Lovelace", "wrote", "it"]],
            [[1, 2, 0, 3, 0], [1, 2, 0, 0]]),
}
out = {}
for name, (model, x, y) in models.items():
    if name == "squad":
        loss = {"start_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "end_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
    elif name == "stsb":
        loss = "mse"
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1 if name == "ner" else None)
    before = [w.copy() for w in model.get_weights()]
    model.compile(optimizer=keras.optimizers.AdamW(1e-2), loss=loss)
    if name != "ner":                                   # a tagger takes ragged lists of word labels as they are
        y = tuple(np.array(v) for v in y) if isinstance(y, tuple) else np.array(y)
    model.fit(x, y, epochs=2, batch_size=2, verbose=0)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(before, model.get_weights()))
    assert moved > 1e-4, (name, moved)                    # trained on JAX
    if name == "squad":                      # per-token outputs of batches of any length concatenate
        logits = model.predict((["q"] * 40, ["short"] * 36 + ["a much longer context " * 30] * 4), batch_size=32,
                               verbose=0)
        assert logits["start_logits"].shape[1] == 64 and logits["start_logits"].shape[0] > 40, logits["start_logits"].shape
    model.save(f"{folder}/{name}.keras")
    answer = model.serve_numpy(*requests[name].values())
    out[name] = {k: (v.tolist() if v.dtype.kind not in "OS" else [x.decode() for x in v.ravel()])
                 for k, v in answer.items()}
json.dump(out, open(folder + "/jax_answers.json", "w"))
"""


@pytest.fixture(scope="module")
def trained_on_jax(tmp_path_factory, minilm_vocab):
    folder = tmp_path_factory.mktemp("jax_models")
    (folder / "requests.json").write_text(json.dumps(REQUESTS))
    script = folder / "train.py"
    script.write_text(JAX_SIDE)
    run_script(script, folder, minilm_vocab)
    return folder, json.loads((folder / "jax_answers.json").read_text())


def _same(ours, theirs, name):
    ours = np.asarray(ours)
    if ours.dtype.kind in "OSU":
        assert [x.decode() if isinstance(x, bytes) else x for x in ours.ravel()] == list(theirs), name
    elif ours.dtype.kind == "f":
        assert_close_at_real_positions(ours, np.asarray(theirs, ours.dtype).reshape(ours.shape), name)
    else:
        np.testing.assert_array_equal(ours, np.asarray(theirs).reshape(ours.shape), err_msg=name)


@pytest.mark.parametrize("kind", list(REQUESTS))
def test_a_jax_model_serves_on_tensorflow(trained_on_jax, tmp_path, kind):
    from savedmodels.export import export_for_serving
    folder, answers = trained_on_jax
    assert keras.backend.backend() == "tensorflow"
    model = keras.models.load_model(folder / f"{kind}.keras")                 # safe_mode=True
    here = model.serve_numpy(*REQUESTS[kind].values())
    for key, value in here.items():                                            # this process: JAX's outputs
        _same(value, answers[kind][key], f"{kind}/{key}")
    written = export_for_serving(model, str(tmp_path / "serving"), kind)
    served, = run_signatures([{"path": written.version, "signature": "serving_default",
                               "inputs": REQUESTS[kind]}], sys.executable)
    compared = [k for k in served if not k.startswith("__") and k in answers[kind]]
    assert compared
    for key in compared:                                                       # TF Serving's path: the same
        _same(np.asarray(served[key], object if isinstance(served[key][0], str) else None)
              if served[key] and not isinstance(served[key][0], list) else np.asarray(served[key]),
              answers[kind][key], f"served {kind}/{key}")


def test_a_jax_classifier_exports_to_litert(trained_on_jax, tmp_path):
    """`bert-keras export --format litert` of the JAX-trained classifier (this TensorFlow process converts it):
    the .tflite, tokenizer inside, answers the raw texts with the JAX model's probabilities."""
    from savedmodels.litert import export_litert
    from savedmodels.litert_runner import LiteRTModel
    folder, answers = trained_on_jax
    model = keras.models.load_model(folder / "sst2.keras")
    path = export_litert(model, str(tmp_path / "sst2.tflite"))
    lite = LiteRTModel(path).serve(text=np.array(TEXTS, object))
    np.testing.assert_allclose(lite["probabilities"], np.asarray(answers["sst2"]["probabilities"]), atol=1e-4,
                               rtol=0)
