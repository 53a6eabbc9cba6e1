import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import BertConfig, BertEncoder, preset_config
from conftest import REPO

TINY = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=40)


def _inputs(batch=3, length=12, vocab=120, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, length + 1, size=batch)
    mask = (np.arange(length)[None] < lengths[:, None]).astype("int32")
    ids = rng.integers(1, vocab, size=(batch, length)).astype("int32") * mask
    types = ((np.arange(length)[None] >= lengths[:, None] // 2) * mask).astype("int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


@pytest.mark.parametrize("name,count", [("bert_base", 109_482_240), ("bert_large", 335_141_888)])
def test_built_encoder_has_published_parameter_count(name, count):
    encoder = BertEncoder(preset_config(name))
    assert encoder.count_params() == count


def test_outputs_are_the_tf_hub_dict():
    encoder = BertEncoder(TINY)
    out = encoder(_inputs())
    assert set(out) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert out["sequence_output"].shape == (3, 12, 32) and out["pooled_output"].shape == (3, 32)
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])


def test_padding_does_not_change_real_tokens():
    # A masked key must get zero attention weight: appending padding leaves every real token's vector alone.
    encoder = BertEncoder(TINY)
    x = _inputs(batch=2, length=10)
    padded = {k: np.pad(v, ((0, 0), (0, 6))) for k, v in x.items()}
    a, b = encoder(x), encoder(padded)
    mask = x["input_mask"][..., None]
    np.testing.assert_allclose(np.asarray(a["sequence_output"]) * mask,
                               np.asarray(b["sequence_output"])[:, :10] * mask, atol=1e-5)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-5)


def test_dropout_only_in_training():
    encoder = BertEncoder(TINY)
    x = _inputs()
    np.testing.assert_array_equal(encoder(x)["sequence_output"], encoder(x)["sequence_output"])
    assert not np.allclose(encoder(x, training=True)["sequence_output"], encoder(x)["sequence_output"])


def test_keras_file_reloads_in_a_fresh_process_with_safe_mode(tmp_path):
    encoder = BertEncoder(TINY)
    x = _inputs()
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    np.savez(tmp_path / "x.npz", **x)
    np.save(tmp_path / "want.npy", np.asarray(encoder(x)["sequence_output"]))
    script = textwrap.dedent(f"""
        import numpy as np, keras
        import bert_keras  # registers the layers, as a user's notebook does
        model = keras.models.load_model({str(path)!r}, safe_mode=True)
        x = dict(np.load({str(tmp_path / 'x.npz')!r}))
        np.save({str(tmp_path / 'got.npy')!r}, np.asarray(model(x)["sequence_output"]))
        print(type(model).__module__)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), np.load(tmp_path / "want.npy"))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_layernorm_and_softmax_in_float32(policy):
    float32 = BertEncoder(TINY)
    x = _inputs()
    keras.mixed_precision.set_global_policy(policy)
    try:
        mixed = BertEncoder(TINY)
        mixed.set_weights(float32.get_weights())
        block = mixed.transformer_layers[0]
        assert block.query.compute_dtype == policy.split("_")[1]
        assert block.attention_norm.compute_dtype == "float32"
        assert mixed.embeddings.layer_norm.compute_dtype == "float32"
        # softmax: the attention probabilities are computed from float32 scores (checked on the traced graph).
        graph = tf.function(lambda t: mixed(t)).get_concrete_function(
            {k: tf.TensorSpec([None, None], tf.int32) for k in x}).graph
        softmax_dtypes = {op.outputs[0].dtype for op in graph.get_operations() if op.type == "Softmax"}
        assert softmax_dtypes == {tf.float32}
        out = mixed(x)
        assert out["sequence_output"].dtype == "float32"
        np.testing.assert_allclose(out["sequence_output"], float32(x)["sequence_output"], atol=0.1)
    finally:
        keras.mixed_precision.set_global_policy("float32")


# What may run in bfloat16 in a mixed_bfloat16 step: the matmuls, their bias adds, and ops that only move or
# convert values (Sum: BatchMatMulV2's gradient reducing broadcast batch axes, none at these shapes;
# UnsortedSegmentSum: the gradient of RealTokens' gather, each token once).
BFLOAT16_OPS = {"MatMul", "BatchMatMulV2", "BiasAdd", "BiasAddGrad", "Sum", "Cast", "Reshape", "Bitcast",
                "Transpose", "Identity", "IdentityN", "GatherV2", "GatherNd", "ScatterNd", "UnsortedSegmentSum",
                "StridedSlice", "StridedSliceGrad", "ZerosLike", "Const"}


def test_mixed_bfloat16_step_runs_matmuls_in_bfloat16_and_element_wise_math_in_float32():
    """A training step's forward and backward under mixed_bfloat16: every matmul of the blocks is bfloat16, while
    GELU, dropout, the attention scale and softmax, the residual adds and the embeddings' sum compute in float32
    (TensorFlow's CPU element-wise kernels are slower in bfloat16 than in float32; docs/performance.md). Gradients
    (no dropout) stay within bfloat16's error of float32's."""
    float32 = BertEncoder(TINY)
    x = _inputs()
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in x}

    def gradients(encoder, training):
        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                out = encoder(x, training=training)
                loss = tf.reduce_sum(out["sequence_output"] ** 2) + tf.reduce_sum(out["pooled_output"])
            return tape.gradient(loss, encoder.trainable_variables)
        return step

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = BertEncoder(TINY)
        mixed.set_weights(float32.get_weights())
        graph = gradients(mixed, True).get_concrete_function(spec).graph
        in_bfloat16 = {op.type for op in graph.get_operations() if "pooler" not in op.name      # pooler: [B, H]
                       and any(t.dtype == tf.bfloat16 for t in op.outputs)}
        assert in_bfloat16 <= BFLOAT16_OPS, in_bfloat16 - BFLOAT16_OPS
        matmuls = [op for op in graph.get_operations() if op.type in ("MatMul", "BatchMatMulV2")
                   and "transformer_layer" in op.name]
        assert matmuls and {op.get_attr("T") for op in matmuls} == {tf.bfloat16}
        got = gradients(mixed, False)(x)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    want = gradients(float32, False)(x)
    for variable, g, w in zip(float32.trainable_variables, got, want):
        g, w = np.asarray(tf.convert_to_tensor(g)), np.asarray(tf.convert_to_tensor(w))
        assert g.dtype == np.float32
        if variable.path.endswith("key/bias"):          # exactly 0 in theory (softmax ignores a shift): noise
            continue
        assert np.linalg.norm(g - w) <= 0.03 * np.linalg.norm(w), variable.path


def test_jit_compile_matches_eager():
    # Under XLA the blocks compute padding too (static shapes); eager skips it and leaves 0 there. Real tokens
    # and the pooled output agree.
    encoder = BertEncoder(TINY)
    x = _inputs()
    mask = x["input_mask"][..., None]
    compiled = tf.function(lambda t: encoder(t), jit_compile=True)(x)
    eager = encoder(x)
    np.testing.assert_allclose(np.asarray(compiled["sequence_output"]) * mask, eager["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(compiled["pooled_output"], eager["pooled_output"], atol=1e-5)
    assert np.abs(np.asarray(compiled["sequence_output"]) * (1 - mask)).max() > 0.1   # XLA did compute padding


def test_padding_is_skipped_and_left_zero():
    encoder = BertEncoder(TINY)
    x = _inputs()
    out = np.asarray(encoder(x)["sequence_output"])
    assert (x["input_mask"] == 0).any()
    np.testing.assert_array_equal(out[x["input_mask"] == 0], 0.0)


@pytest.mark.parametrize("integer", [False, True], ids=["float64_view", "integer_view"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_swap_heads_is_the_head_transpose_in_values_and_gradients(dtype, integer):
    """The attention's head transpose moves its bits through another dtype's view (oneDNN's float transpose is slow
    on small tensors): same bits out, and the gradient is tf.transpose's. Inside a tf.function, where TensorFlow's
    kernels run with denormals flushed: the pairs below make zero, denormal and NaN float64 items, whose bits must
    survive the move."""
    from bert_keras.layers import integer_head_swaps, swap_heads
    x = tf.random.stateless_normal([2, 5, 3, 8], seed=[1, 2]).numpy()
    x[0, 0, 0, :8] = [0.5, 0.0, -1.5, -0.0, 3.0, 1e-40, np.nan, 2.0]     # float32 pairs -> special float64s
    x[1, 4, 2, :4] = [np.inf, -np.inf, 0.0, 0.0]
    x = tf.cast(x, dtype)
    w = tf.cast(tf.reshape(tf.range(240, dtype=tf.float32), [2, 3, 5, 8]), dtype)

    def gradient_of(swap):
        @tf.function
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = swap(x)
                loss = tf.reduce_sum(tf.where(tf.math.is_finite(y), tf.cast(y * w, tf.float32), 0.0))
            return y, tape.gradient(loss, x)
        if not integer:
            return run(x)
        with integer_head_swaps():
            return run(x)
    ours, reference = gradient_of(swap_heads), gradient_of(lambda t: tf.transpose(t, (0, 2, 1, 3)))
    bits = tf.int32 if dtype == "float32" else tf.int16
    np.testing.assert_array_equal(tf.bitcast(ours[0], bits).numpy(), tf.bitcast(reference[0], bits).numpy())
    np.testing.assert_array_equal(ours[1].numpy(), reference[1].numpy())


def test_the_encoder_graph_has_no_integer_transpose():
    """oneDNN (on in bert_keras) logs "oneDNN supports DT_INT32 only on platforms with AVX-512" for a Transpose of
    any non-float dtype on CPUs without AVX-512 (probed on TF 2.20: int8-64, uint8-32; float64 is left alone), so
    the encoder's head swaps must not be integer transposes on TensorFlow's CPU runtime."""
    encoder = BertEncoder(preset_config("bert_tiny"))
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    graph = tf.function(lambda x: encoder(x, training=True)).get_concrete_function(spec).graph
    transposes = [(op.name, op.get_attr("T")) for op in graph.get_operations() if op.type == "Transpose"]
    assert transposes and all(dtype.is_floating for _, dtype in transposes), transposes


@pytest.mark.parametrize("one_sequence", [False, True], ids=["batch", "one_sequence"])
def test_litert_layers_compute_the_same_encoder(one_sequence):
    """Under litert_layers (the LiteRT conversion's trace: Q, K and V as one matmul over the concatenated kernels,
    plain transposes; one_sequence: [B * S, C] reshapes with constant shapes instead of gathering real tokens) the
    encoder gives the default trace's outputs: at every position of an unpadded sequence traced with a static
    batch of 1, and at the real positions of a padded batch (one_sequence computes padding instead of leaving 0)."""
    from bert_keras.layers import litert_layers
    encoder = BertEncoder(TINY)
    batch = _inputs()
    one = {k: v[:1, :int(batch["input_mask"][0].sum())] for k, v in batch.items()}
    assert one["input_mask"].all() and (batch["input_mask"] == 0).any()
    for x, static in ((one, [1, None]), (batch, [None, None])):
        spec = {k: tf.TensorSpec(static, tf.int32) for k in x}
        with litert_layers(one_sequence):
            traced = tf.function(lambda t: encoder(t)).get_concrete_function(spec)
            pooled = tf.function(lambda t: encoder(t, pooled_only=True)).get_concrete_function(spec)
        reference, got = encoder(x), traced(x)
        mask = x["input_mask"][..., None]
        np.testing.assert_allclose(np.asarray(got["sequence_output"]) * mask, reference["sequence_output"], atol=1e-5)
        np.testing.assert_allclose(got["pooled_output"], reference["pooled_output"], atol=1e-5)
        np.testing.assert_allclose(pooled(x), reference["pooled_output"], atol=1e-5)
        if one_sequence and static[0] == 1:
            ops = {op.type for op in traced.graph.get_operations()}
            assert not ops & {"ScatterNd", "Where"}, ops          # no real-token index, no scatters
