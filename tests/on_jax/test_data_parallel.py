"""Data parallelism on the JAX route (issue 41): 20 training steps split over 8 devices (JAX's simulated CPU
devices, the stand-in for a TPU's 8 cores) give the weights of the same 20 steps on one device at the same global
batch, for a classifier fed raw text through its host tf.data pipeline and for the MLM + NSP pretrainer; and the
split really happened (the variables are replicated on 8 devices, the batch sharded over them)."""

import json

import pytest

from backend_process import run_script

pytestmark = pytest.mark.jax

JAX_SIDE = """
import json, sys
import numpy as np, keras, jax, tensorflow as tf
import bert_keras
from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.tasks import BertClassifier, BertPretrainer
from bert_keras.training import create_optimizer
from bert_keras.training.data_parallel import start_data_parallel
assert len(jax.devices()) == 8, jax.devices()
vocab, out = sys.argv[1], sys.argv[2]
texts = [line.split("\\t")[0] for line in open(sys.argv[3], encoding="utf-8").read().splitlines()[1:321]]
labels = [int(line.split("\\t")[1]) for line in open(sys.argv[3], encoding="utf-8").read().splitlines()[1:321]]
STEPS, BATCH = 20, 16

def classifier(strategy):
    devices = start_data_parallel(strategy, BATCH)
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, preprocessor=BertPreprocessor(vocab, max_seq_length=64))
    model.compile(optimizer=create_optimizer(1e-3, STEPS), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    data = model.text_dataset(texts, np.array(labels), batch_size=BATCH, training=True, seed=0).repeat()
    model.fit(data, steps_per_epoch=STEPS, epochs=1, verbose=0, shuffle=False)
    return model, devices

def pretrainer(strategy):
    devices = start_data_parallel(strategy, BATCH)
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(PRESETS["bert_tiny"]))
    model.compile(optimizer=create_optimizer(1e-3, STEPS), jit_compile=True)
    rng = np.random.default_rng(0)
    n, s, p = BATCH * STEPS, 32, 5
    x = {"input_word_ids": rng.integers(1000, 20000, (n, s)).astype("int32"), "input_mask": np.ones((n, s), "int32"),
         "input_type_ids": (np.arange(s) >= 16).astype("int32")[None].repeat(n, 0),
         "masked_lm_positions": rng.integers(1, s, (n, p)).astype("int32")}
    y = {"masked_lm_ids": rng.integers(1000, 20000, (n, p)).astype("int32"),
         "masked_lm_weights": (rng.random((n, p)) > 0.2).astype("float32"),
         "next_sentence_labels": rng.integers(0, 2, (n, 1)).astype("int32")}
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH), epochs=1, verbose=0, shuffle=False)
    return model, devices

result = {}
for name, build in (("classifier", classifier), ("pretrainer", pretrainer)):
    one, one_devices = build("cpu")
    one_weights = [np.asarray(w) for w in one.get_weights()]
    eight, eight_devices = build("auto")
    kernel = eight.encoder.transformer_layers[0].query.kernel.value
    eight_weights = [np.asarray(w) for w in eight.get_weights()]
    initial = BertEncoder(PRESETS["bert_tiny"])      # how far training moved the weights, for scale
    result[name] = {"devices": [one_devices, eight_devices],
                    "variable_devices": len(kernel.sharding.device_set),
                    "max_difference": max(float(np.abs(a - b).max()) for a, b in zip(one_weights, eight_weights)),
                    "max_update": max(float(np.abs(a - b).max()) for a, b in zip(
                        one_weights[:len(initial.get_weights())], initial.get_weights())),
                    "iterations": [int(one.optimizer.iterations.numpy()), int(eight.optimizer.iterations.numpy())]}
json.dump(result, open(out, "w"))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory, minilm_vocab):
    from bert_keras.data import SAMPLES
    folder = tmp_path_factory.mktemp("data_parallel")
    script = folder / "train.py"
    script.write_text(JAX_SIDE)
    run_script(script, minilm_vocab, folder / "result.json", f"{SAMPLES}/sst2_train.tsv", devices=8)
    return json.loads((folder / "result.json").read_text())


@pytest.mark.parametrize("model", ["classifier", "pretrainer"])
def test_eight_devices_train_the_weights_of_one(runs, model):
    run = runs[model]
    assert run["devices"] == [1, 8] and run["variable_devices"] == 8      # replicated over 8, vs one device
    assert run["iterations"] == [20, 20]
    assert run["max_update"] > 1e-3                                        # training moved the weights
    assert run["max_difference"] < 2e-5, run                               # float32 summation order only
