"""Packed fine-tuning on JAX (issue 49 item 4), in one JAX process: bert_tiny's classifier saved here on TensorFlow,
real SST-2 phrases (bert_keras/data/samples) packed up to 8 a row at one static length; on JAX each example's
packed logits equal its logits alone (and TensorFlow's) within 1e-5, the packed loss equals Keras' unpacked loss,
and `finetune --pack --seq-length` trains there and saves the ordinary classifier. A token tagger's packed logits
equal each sentence's alone at every real token. The TensorFlow side of the same checks, with the mutation:
tests/finetune/test_packed_finetune.py, test_packed_tagging.py."""

import json
import pickle

import keras
import numpy as np
import pytest

from backend_process import REPO, run_script

pytestmark = pytest.mark.jax

SEQ, K, N = 64, 8, 48
SAMPLES = f"{REPO}/bert_keras/data/samples/sst2_train.tsv"

JAX_SIDE = """
import json, pickle, sys
import keras, numpy as np
import bert_keras  # noqa: F401 (registers the classes load_model needs)
assert keras.backend.backend() == "jax"
folder, vocab, samples = sys.argv[1:4]
data = pickle.load(open(f"{folder}/inputs.pkl", "rb"))
model = keras.models.load_model(f"{folder}/classifier.keras")
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
out = {"logits_alone": keras.ops.convert_to_numpy(model(data["alone"], training=False)),
       "logits_packed": keras.ops.convert_to_numpy(model(data["packed"], training=False))}
out["loss"] = float(model.compute_loss(data["packed"], data["targets"], out["logits_packed"], data["weights"]))
tagger = keras.models.load_model(f"{folder}/tagger.keras")                 # a token tagger, packed the same way
tagging = data["tagging"]
out["tagger_alone"] = keras.ops.convert_to_numpy(tagger(tagging["alone"], training=False))
out["tagger_packed"] = keras.ops.convert_to_numpy(tagger(tagging["packed"], training=False))
from bert_keras_cli.main import main
code = main(["finetune", "--task", "sst-2", "--model", "bert_tiny", "--vocab", vocab, "--train", samples,
             "--max-train-examples", "96", "--seq-length", "64", "--pack", "--batch-size", "16", "--epochs", "1",
             "--quiet", "--out", f"{folder}/run"])
out["code"] = code
pickle.dump(out, open(f"{folder}/out.pkl", "wb"))
"""


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory, minilm_vocab):
    from bert_keras.finetune.packed_examples import example_ids, pack_examples, packed_rows
    from bert_keras.finetune.registry import get_task
    from bert_keras.loading import load_backbone
    folder = tmp_path_factory.mktemp("packed_finetune_jax")
    keras.utils.set_random_seed(0)
    task = get_task("sst-2")
    examples = task.read(SAMPLES)[:N]
    encoder, preprocessor = load_backbone("bert_tiny", minilm_vocab, seq_length=SEQ, max_seq_length=SEQ)
    model = task.build_model(encoder, preprocessor, examples)
    x, y = task.inputs(examples)
    ids, lengths = example_ids(model, x)
    rows = pack_examples(lengths, SEQ, K)
    present = rows >= 0
    alone = {**ids, "input_mask": (np.arange(SEQ) < lengths[:, None]).astype("int32")}
    data = {"alone": alone, "packed": packed_rows(ids, lengths, rows), "rows": rows, "y": y,
            "targets": np.where(present, y[np.maximum(rows, 0)], 0), "weights": present.astype("float32"),
            "tensorflow": keras.ops.convert_to_numpy(model(alone, training=False))}
    model.save(folder / "classifier.keras")
    data["tagging"] = tagging_case(folder, minilm_vocab)
    with open(folder / "inputs.pkl", "wb") as f:
        pickle.dump(data, f)
    (folder / "jax_side.py").write_text(JAX_SIDE)
    run_script(folder / "jax_side.py", folder, minilm_vocab, SAMPLES, backend="jax")
    with open(folder / "out.pkl", "rb") as f:
        return {**pickle.load(f), **data, "folder": folder}


def tagging_case(folder, vocab) -> dict:
    """bert_tiny's tagger saved to `folder` and CoNLL-style sentences alone and packed (test_packed_tagging's)."""
    from synthetic_data import conll_file
    from bert_keras.finetune.registry import get_task
    from bert_keras.loading import load_backbone
    task = get_task("conll2003")
    examples = task.read(str(conll_file(folder / "conll.txt")))
    encoder, preprocessor = load_backbone("bert_tiny", vocab, seq_length=SEQ, max_seq_length=SEQ)
    tagger = task.build_model(encoder, preprocessor, examples)
    x, y = task.inputs(examples)
    from bert_keras.finetune.packed_examples import example_ids, pack_examples, packed_rows
    ids, lengths, _ = example_ids(tagger, x, y=y)
    rows = pack_examples(lengths, SEQ, K)
    tagger.save(folder / "tagger.keras")
    return {"alone": {**ids, "input_mask": (np.arange(SEQ) < lengths[:, None]).astype("int32")},
            "packed": packed_rows(ids, lengths, rows), "rows": rows, "lengths": lengths}


def test_packed_tagger_logits_equal_unpacked_on_jax(jax_run):
    tagging = jax_run["tagging"]
    alone, packed = jax_run["tagger_alone"], jax_run["tagger_packed"]
    checked = 0
    for r, row in enumerate(tagging["rows"]):
        start = 0
        for i in row[row >= 0]:
            n = tagging["lengths"][i]
            np.testing.assert_allclose(packed[r, start:start + n], alone[i, :n], atol=1e-5, rtol=0)
            start, checked = start + n, checked + 1
    assert checked == len(tagging["lengths"]) and len(tagging["rows"]) < checked / 2


def test_packed_predictions_equal_unpacked_on_jax(jax_run):
    rows, alone = jax_run["rows"], jax_run["logits_alone"]
    gathered = np.zeros_like(alone)
    gathered[rows[rows >= 0]] = jax_run["logits_packed"][rows >= 0]
    np.testing.assert_allclose(gathered, alone, atol=1e-5, rtol=0)
    np.testing.assert_allclose(alone, jax_run["tensorflow"], atol=1e-5, rtol=0)
    reference = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(jax_run["y"], alone))
    assert abs(jax_run["loss"] - reference) <= 1e-6 * reference


def test_finetune_pack_trains_on_jax(jax_run):
    assert jax_run["code"] == 0
    record = json.loads((jax_run["folder"] / "run" / "metrics.json").read_text())
    assert record["config"]["backend"] == "jax" and record["packed"]["examples"] == 96
    assert record["steps"] == record["packed"]["rows"] // record["packed"]["rows_per_step"]
