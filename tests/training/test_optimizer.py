import keras
import numpy as np
import pytest

from bert_keras.training import WarmupLinearDecay, create_optimizer


def test_schedule_is_google_research_warmup_then_linear_decay():
    # peak 1e-4, 10 warm-up steps, 100 total: hand-computed from google-research/bert optimization.py.
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=100)
    for step, want in [(0, 0.0), (5, 5e-5), (9, 9e-5), (10, 9e-5), (50, 5e-5), (99, 1e-6), (100, 0.0), (150, 0.0)]:
        assert float(schedule(step)) == pytest.approx(want, rel=1e-5, abs=1e-12), step  # float32


def test_schedule_serializes():
    schedule = WarmupLinearDecay(2e-5, 3, 30)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert float(again(7)) == pytest.approx(float(schedule(7)))


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
