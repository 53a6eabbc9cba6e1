import keras
import numpy as np
import pytest

from bert_keras.training import WarmupLinearDecay, create_optimizer


def test_schedule_is_google_research_warmup_then_linear_decay():
    # peak 1e-4, 10 warm-up steps, 100 total: hand-computed from google-research/bert optimization.py.
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=100)
    for step, want in [(0, 0.0), (5, 5e-5), (9, 9e-5), (10, 9e-5), (50, 5e-5), (99, 1e-6), (100, 0.0), (150, 0.0)]:
        assert float(schedule(step)) == pytest.approx(want, rel=1e-5, abs=1e-12), step  # float32


def test_linear_schedule_is_transformers_get_linear_schedule_with_warmup():
    # transformers' lr_lambda: step / max(1, warmup) during warm-up, then max(0, (total - step) /
    # max(1, total - warmup)); hand-computed for peak 1e-4, 10 warm-up steps, 100 total (tests/tools/
    # test_schedule_torch.py checks it against transformers itself).
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=100, schedule="linear")
    for step, want in [(0, 0.0), (5, 5e-5), (9, 9e-5), (10, 1e-4), (55, 5e-5), (99, 1e-4 / 90), (100, 0.0),
                       (150, 0.0)]:
        assert float(schedule(step)) == pytest.approx(want, rel=1e-5, abs=1e-12), step
    assert float(WarmupLinearDecay(1.0, 0, 4, schedule="linear")(1)) == pytest.approx(0.75)   # no warm-up
    with pytest.raises(ValueError, match="--schedule"):
        WarmupLinearDecay(1e-4, 1, 10, schedule="cosine")


@pytest.mark.parametrize("schedule", ["google", "linear"])
def test_schedule_serializes(schedule):
    rate = WarmupLinearDecay(2e-5, 3, 30, schedule=schedule)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(rate))
    assert float(again(7)) == pytest.approx(float(rate(7))) and again.schedule == schedule
    optimizer = create_optimizer(2e-5, 30, 3, schedule=schedule, epsilon=1e-8)
    config = optimizer.get_config()
    assert config["epsilon"] == 1e-8 and config["learning_rate"]["config"]["schedule"] == schedule


@pytest.mark.parametrize("kind", ["adamw", "lamb"])
def test_weight_decay_skips_layernorm_and_biases(kind):
    dense, norm = keras.layers.Dense(3), keras.layers.LayerNormalization()
    dense.build((None, 4))
    norm.build((None, 3))
    for v in dense.weights + norm.weights:
        v.assign(np.full(v.shape, 2.0, "float32"))
    optimizer = create_optimizer(0.1, total_steps=10, warmup_steps=0, weight_decay=0.5, optimizer=kind)
    variables = dense.weights + norm.weights
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])  # only decay moves weights
    assert np.all(np.asarray(dense.kernel) < 2.0)
    for v in (dense.bias, norm.gamma, norm.beta):
        np.testing.assert_array_equal(np.asarray(v), 2.0)
    if kind == "adamw":  # decoupled decay at step 0: w - lr * wd * w with lr = peak (no warm-up)
        np.testing.assert_allclose(np.asarray(dense.kernel), 2.0 - 0.1 * 0.5 * 2.0, rtol=1e-6)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupLinearDecay(1e-4, warmup_steps=20, total_steps=10)
    with pytest.raises(ValueError, match="adamw' or 'lamb"):
        create_optimizer(1e-4, 10, optimizer="sgd")


def test_adamw_steps_follow_pytorchs_adamw_algorithm():
    # torch.optim.AdamW as its documentation writes it: decay, moments, bias correction, then
    # lr * m_hat / (sqrt(v_hat) + eps). Small gradients (1e-5, 1e-7) are where Keras' own AdamW departs.
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(4, 3)).astype("float64")
    grads = [rng.normal(size=(4, 3)) * scale for scale in (1e-5, 1e-7, 1e-3, 1e-5, 1.0)]
    lr_peak, total, wd, eps, b1, b2 = 1e-2, 1000, 0.01, 1e-6, 0.9, 0.999
    variable = keras.Variable(w0.astype("float32"), name="kernel")
    optimizer = create_optimizer(lr_peak, total_steps=total, warmup_steps=0, weight_decay=wd, clipnorm=None)
    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for t, g in enumerate(grads, start=1):
        lr = lr_peak * (1 - (t - 1) / total)
        optimizer.apply_gradients([(g.astype("float32"), variable)])
        w = w - lr * wd * w
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        np.testing.assert_allclose(np.asarray(variable), w, rtol=1e-5, atol=1e-6)   # float32


def test_a_runs_settings_reach_its_optimizer():
    from bert_keras.training.config import TrainingConfig
    from bert_keras.training.setup import compile_for_training
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    config = TrainingConfig(learning_rate=2e-3, schedule="linear", weight_decay=0.03, adam_epsilon=1e-8)
    compile_for_training(model, config, total_steps=20, warmup_steps=2, loss="mse")
    got = model.optimizer.get_config()
    assert (got["epsilon"], got["weight_decay"]) == (1e-8, 0.03)
    assert got["learning_rate"]["config"] == {"peak": 2e-3, "warmup_steps": 2, "total_steps": 20,
                                              "schedule": "linear"}


def test_fine_tuning_defaults_to_the_linear_schedule_and_pretraining_to_googles():
    """docs/accuracy.md's schedule table chose transformers' linear decay for fine-tuning (its mean was at or above
    google-research's on every task); pretraining keeps google-research's recipe. The CLI and the configs agree."""
    from bert_keras.finetune import FinetuneConfig
    from bert_keras.pretraining import PretrainConfig
    from bert_keras_cli.main import parse_command_line
    finetune = parse_command_line(["finetune", "--task", "sst-2", "--model", "bert_tiny", "--out", "run"])
    pretrain = parse_command_line(["pretrain", "--model", "bert_tiny", "--text", "a.txt", "--out", "run"])
    assert finetune.schedule == FinetuneConfig(task="sst-2", model="bert_tiny", out="run").schedule == "linear"
    assert pretrain.schedule == PretrainConfig(model="bert_tiny", out="run").schedule == "google"


def test_a_sparse_gradient_is_clipped_as_its_dense_table_and_scattered_once():
    """An embedding table's gradient arrives as tf.IndexedSlices (its rows, a repeated id's rows summed). Clipping
    to the global norm reads it twice (the norm, the scaling); it is made dense once, one UnsortedSegmentSum in
    the step's graph, and two AdamW steps (the first clipped, the second not) follow numpy's on the dense table."""
    import tensorflow as tf
    rng = np.random.default_rng(0)
    t0, k0 = rng.normal(size=(6, 3)), rng.normal(size=(3, 2))
    table, kernel = keras.Variable(t0.astype("float32"), name="embeddings"), keras.Variable(k0.astype("float32"))
    lr_peak, total, wd, eps, b1, b2 = 1e-2, 100, 0.01, 1e-6, 0.9, 0.999
    optimizer = create_optimizer(lr_peak, total_steps=total, warmup_steps=0, weight_decay=wd, clipnorm=1.0)
    optimizer.build([table, kernel])
    ids = tf.constant([4, 1, 4])

    @tf.function
    def step(rows, kernel_gradient):
        optimizer.apply_gradients([(tf.IndexedSlices(rows, ids, tf.constant([6, 3])), table),
                                   (kernel_gradient, kernel)])
    steps = [(rng.normal(size=(3, 3)) * 3, rng.normal(size=(3, 2))), (rng.normal(size=(3, 3)) * 0.01,
                                                                      rng.normal(size=(3, 2)) * 0.01)]
    graph = step.get_concrete_function(tf.TensorSpec([3, 3]), tf.TensorSpec([3, 2])).graph
    assert [op.type for op in graph.get_operations()].count("UnsortedSegmentSum") == 1
    w, m, v = [t0, k0], [0, 0], [0, 0]
    for t, (rows, kernel_gradient) in enumerate(steps, start=1):
        step(tf.constant(rows, tf.float32), tf.constant(kernel_gradient, tf.float32))
        dense = np.zeros((6, 3))
        np.add.at(dense, [4, 1, 4], rows)
        grads = [dense, kernel_gradient]
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        assert (norm > 1) == (t == 1)
        lr = lr_peak * (1 - (t - 1) / total)
        for i, g in enumerate(grads):
            g = g * min(1.0, 1.0 / norm)
            w[i] = w[i] - lr * wd * w[i]
            m[i], v[i] = b1 * m[i] + (1 - b1) * g, b2 * v[i] + (1 - b2) * g * g
            w[i] = w[i] - lr * (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
    np.testing.assert_allclose(np.asarray(table), w[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(kernel), w[1], rtol=1e-5, atol=1e-6)
