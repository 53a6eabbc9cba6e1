"""In-batch negatives over several JAX devices (issue 56): with Keras' DataParallel the step sees the global batch
as one array sharded over the devices, so MultipleNegativesRankingLoss's candidates are every row of the global
batch, not each device's own. On 8 simulated devices: the loss (and its gradient) of a batch sharded over 8
devices equals one device's on the same global batch within 1e-5, and differs from the mean of 8 device-local
losses (what per-device negatives would give); and `finetune --task embedding`'s model trains 4 steps over 8
devices to the weights and losses of the same steps on one device."""

import json

import pytest

from backend_process import run_script

pytestmark = pytest.mark.jax

JAX_SIDE = """
import json, sys
import numpy as np, keras, jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.data.pairs import TextRow
from bert_keras.finetune.embedding import EmbeddingTask
from bert_keras.finetune.embedding_model import EmbeddingTrainingModel
from bert_keras.tasks import BertEmbedder
from bert_keras.tasks.embedding_losses import multiple_negatives_ranking_loss
from bert_keras.training import create_optimizer
from bert_keras.training.data_parallel import start_data_parallel
assert len(jax.devices()) == 8, jax.devices()
vocab, out = sys.argv[1], sys.argv[2]
BATCH, STEPS = 16, 4

rng = np.random.default_rng(0)
e = (rng.normal(size=(BATCH, 1, 32)) + 2.0 * rng.normal(size=(BATCH, 3, 32))).astype("float32")
loss = jax.jit(multiple_negatives_ranking_loss)
grad = jax.jit(jax.grad(multiple_negatives_ranking_loss))
one = jax.device_put(e, jax.devices()[0])
sharded = jax.device_put(e, NamedSharding(Mesh(np.array(jax.devices()), ("batch",)), PartitionSpec("batch")))
result = {"loss_one": float(loss(one)), "loss_eight": float(loss(sharded)),
          "shards": len(sharded.sharding.device_set),
          "local_mean": float(np.mean([float(loss(e[i * 2:(i + 1) * 2])) for i in range(8)])),
          "grad_difference": float(np.abs(np.asarray(grad(one)) - np.asarray(grad(sharded))).max())}

topics = ["cats", "dogs", "rain", "music", "football", "coffee", "trains", "mountains", "books", "sea", "bread",
          "winter", "tea", "clouds", "chess", "rivers"]
rows = [TextRow((f"what about {t}?", f"a passage on {t} and {t}", f"a passage on {topics[(i + 5) % 16]}"))
        for i, t in enumerate(topics)] * STEPS

def train(strategy):
    devices = start_data_parallel(strategy, BATCH)
    keras.utils.set_random_seed(0)
    task = EmbeddingTask("embedding", loss="mnrl")
    model = task.build_model(BertEncoder(PRESETS["bert_tiny"]), BertPreprocessor(vocab, max_seq_length=32), rows)
    model.compile(optimizer=create_optimizer(1e-3, STEPS), jit_compile=True, **task.compile_args())
    data = task.dataset(rows, model, BATCH, training=False)
    history = model.fit(data, epochs=1, verbose=0, shuffle=False)
    return model, devices, history.history["loss"][-1]

(one_model, one_devices, one_loss), (eight_model, eight_devices, eight_loss) = train("cpu"), train("auto")
initial = BertEncoder(PRESETS["bert_tiny"]).get_weights()
one_weights, eight_weights = one_model.get_weights(), eight_model.get_weights()
result.update({"devices": [one_devices, eight_devices], "train_loss": [float(one_loss), float(eight_loss)],
               "max_difference": max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
                                     for a, b in zip(one_weights, eight_weights)),
               "max_update": max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(one_weights, initial))})
json.dump(result, open(out, "w"))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory, minilm_vocab):
    folder = tmp_path_factory.mktemp("embedding_gather")
    script = folder / "gather.py"
    script.write_text(JAX_SIDE)
    run_script(script, minilm_vocab, folder / "result.json", devices=8)
    result = json.loads((folder / "result.json").read_text())
    print(result)
    return result


def test_the_loss_over_eight_devices_is_the_global_batchs(run):
    assert run["shards"] == 8
    assert abs(run["loss_eight"] - run["loss_one"]) < 1e-5, run
    assert run["grad_difference"] < 1e-5, run
    # Negatives from each device's 2 rows alone would give another loss: the check can tell them apart.
    assert abs(run["local_mean"] - run["loss_one"]) > 0.1, run


def test_eight_devices_train_the_embedder_of_one(run):
    assert run["devices"] == [1, 8]
    assert run["max_update"] > 1e-3, run
    assert abs(run["train_loss"][0] - run["train_loss"][1]) < 1e-5, run
    assert run["max_difference"] < 2e-5, run
