"""The packed encoder on JAX (static shapes, padding computed): tests/pretraining/test_packed_encoder.py's checks in
one JAX process (helpers: tests/pretraining/packed_batches.py). The real MiniLM pretrainer saved here on
TensorFlow, the same real instances padded and packed: per sequence the same vectors, MLM and NSP logits and
loss, and not with attention crossing sequences; 20 SGD steps of bert_tiny (dropout off, each step compiled by XLA) packed and unpacked reach the same weights; and
`pretrain` trains on packed records split over 2 simulated devices (keras.distribution.DataParallel)."""

import json
import pickle
import sys

import numpy as np
import pytest

from backend_process import REPO, run_script

sys.path.insert(0, f"{REPO}/tests/pretraining")
from packed_batches import (SEQ, STEPS, assert_same_per_sequence, both_ways, forward_rows,  # noqa: E402
                            make_instances, training_batches, write_records)

pytestmark = pytest.mark.jax

JAX_SIDE = """
import pickle, sys
import keras
sys.path.insert(0, %(tests)r)
import packed_batches as packed_tests
from bert_keras import layers
assert keras.backend.backend() == "jax"
folder = sys.argv[1]
data = pickle.load(open(f"{folder}/batches.pkl", "rb"))
model = keras.models.load_model(f"{folder}/pretrainer.keras")
out = {way: packed_tests.per_sequence(model, batch) for way, batch in data["forward"].items()}
block_diagonal, layers.packed_attention_bias = layers.packed_attention_bias, packed_tests.crossing_attention
out["crossed"] = packed_tests.per_sequence(model, data["forward"]["packed"])
layers.packed_attention_bias = block_diagonal
for way in (0, 1):
    tiny = packed_tests.sgd(packed_tests.tiny_pretrainer(), "jax")
    start = [w.copy() for w in map(keras.ops.convert_to_numpy, tiny.get_weights())]
    out[f"train_{way}"] = (*packed_tests.train(tiny, [b[way] for b in data["train"]]), start)
# Last: pretrain sets a global distribution (DataParallel over the 2 devices).
from bert_keras.pretraining import PretrainConfig, pretrain
run = pretrain(PretrainConfig(model="bert_tiny", vocab=sys.argv[2], out=f"{folder}/run", records=sys.argv[3],
                              max_seq_length=packed_tests.SEQ, max_predictions_per_seq=packed_tests.PRED,
                              train_steps=4, save_every=2, batch_size=4, learning_rate=1e-3, warmup_steps=1,
                              progress=False))
out["pretrain"] = {"packed": run["packed"], "replicas": run["replicas"]}
pickle.dump(out, open(f"{folder}/out.pkl", "wb"))
""" % {"tests": f"{REPO}/tests/pretraining"}


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory, minilm_dir, minilm_vocab):
    """Saves the MiniLM pretrainer and the batches, runs JAX_SIDE -> (its outputs, the batches)."""
    import keras

    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.pretraining.packing import pack_lengths
    from bert_keras.tasks import BertPretrainer
    folder = tmp_path_factory.mktemp("packed_encoder_jax")
    instances = make_instances(minilm_vocab, folder)
    (folder / "packed").mkdir()
    rows = pack_lengths(instances["input_mask"].sum(1), SEQ)
    keras.utils.set_random_seed(0)
    BertPretrainer(load_checkpoint(minilm_dir)[1]).save(folder / "pretrainer.keras")
    unpacked, packed = both_ways(instances, forward_rows(rows))
    with open(folder / "batches.pkl", "wb") as f:
        pickle.dump({"forward": {"unpacked": unpacked, "packed": packed},
                     "train": training_batches(instances, rows, STEPS)}, f)
    (folder / "jax_side.py").write_text(JAX_SIDE)
    records = write_records(minilm_vocab, folder / "packed", pack=True)
    run_script(folder / "jax_side.py", folder, minilm_vocab, records[0], backend="jax", devices=2)
    with open(folder / "out.pkl", "rb") as f:
        return {**pickle.load(f), "folder": folder}


def test_packed_rows_give_each_sequence_its_own_outputs_on_jax(jax_run):
    assert_same_per_sequence(jax_run["unpacked"], jax_run["packed"])
    assert np.abs(jax_run["crossed"]["sequence"] - jax_run["unpacked"]["sequence"]).max() > 0.1
    with pytest.raises(AssertionError):
        assert_same_per_sequence(jax_run["unpacked"], jax_run["crossed"])


def test_training_packed_reaches_the_unpacked_weights_on_jax(jax_run):
    (unpacked_losses, unpacked, start), (packed_losses, packed, _) = jax_run["train_0"], jax_run["train_1"]
    np.testing.assert_allclose(packed_losses, unpacked_losses, rtol=1e-5)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(unpacked, start))
    apart = max(float(np.abs(a - b).max()) for a, b in zip(unpacked, packed))
    assert moved > 5e-3 and apart < 2e-6, (apart, moved)


def test_pretrain_trains_packed_records_over_two_devices(jax_run):
    """`pretrain --records <packed>` on JAX, each batch of rows split over 2 devices."""
    assert jax_run["pretrain"] == {"packed": True, "replicas": 2}
    metrics = json.loads((jax_run["folder"] / "run" / "metrics.json").read_text())
    assert metrics["packed"] and metrics["sequences_per_step"] > metrics["rows_per_step"] == 4
    assert all(np.isfinite(h["loss"]) for h in metrics["history"])
