"""The layers of a BERT encoder, as google-research/bert defines them.

Shapes: B batch, S sequence length, H hidden size, N heads, D = H / N head size, I intermediate size.

Numerics follow the original exactly: post-LayerNorm blocks, LayerNorm epsilon 1e-12, the exact erf GELU
(google-research/bert's `gelu` is the tanh approximation in code but the released checkpoints, HF and the
paper's PyTorch port use erf; peers that default to tanh drift by ~1e-3). Under a mixed precision policy the
residual stream, the embeddings' sum, LayerNorm, softmax, GELU and dropout stay in float32; only the matmuls (and
their bias adds) run in float16/bfloat16 (`in_float32` says why).
"""

from __future__ import annotations

import contextlib
import threading

import keras
import tensorflow as tf
from keras import ops
from tensorflow.python.ops import control_flow_util

from bert_keras.backends import on_tensorflow

_PACKAGE = "bert_keras"


def activation_fn(name: str):
    """BERT's activations by config name: `gelu` is the exact erf form, `gelu_new` the tanh approximation.
    Computed in float32 whatever the input's dtype (`in_float32`)."""
    if name == "gelu":
        return in_float32(lambda x: keras.activations.gelu(x, approximate=False))
    if name == "gelu_new":
        return in_float32(lambda x: keras.activations.gelu(x, approximate=True))
    return in_float32(keras.activations.get(name))


def in_float32(fn):
    """fn applied in float32 to a float16/bfloat16 x, its result cast back to x's dtype; other dtypes as they are.

    Why: under a mixed precision policy only matmuls gain from half precision. TensorFlow's CPU kernels for
    element-wise ops (GELU's erfc, exp and products, forward and backward) are built for AVX, not AVX-512, and
    are slower on bfloat16 than on float32 (they convert through float32): MiniLM's GELU, forward and backward on
    [2048, 1536], took 51 ms in bfloat16 against 28 ms in float32 with the casts (2 AMD EPYC cores with AMX,
    2026-11-29). A float32 x is untouched (no casts): float32 results are fn's own.

    Args:
        fn: an element-wise function of one tensor.

    Returns:
        The function x -> fn(x) as above: any shape in, the same shape and dtype out.

    Example:
        >>> gelu = in_float32(lambda x: keras.activations.gelu(x, approximate=False))
        >>> gelu(keras.ops.ones((2, 3), "bfloat16")).dtype.name
        'bfloat16'
    """
    def apply(x):
        if keras.backend.standardize_dtype(x.dtype) in ("bfloat16", "float16"):
            return ops.cast(fn(ops.cast(x, "float32")), x.dtype)
        return fn(x)
    return apply


def _dense(units, initializer_range, name, activation=None):
    return keras.layers.Dense(
        units, activation=activation, name=name,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))


def _layer_norm(epsilon, name):
    # float32 whatever the global policy: LayerNorm statistics in half precision lose BERT's accuracy.
    return keras.layers.LayerNormalization(epsilon=epsilon, name=name, dtype="float32")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertEmbeddings(keras.layers.Layer):
    """BERT's input layer: word + position + token-type embeddings, then LayerNorm and dropout.

    The three tables are summed (positions 0..S-1, learned, as google-research/bert) and normalised in float32
    whatever the mixed precision policy. Hyper-parameters are keyword-only: several are ints of similar size.
    The variable names (`word_embeddings`, `position_embeddings`, `token_type_embeddings`, `layer_norm`) are
    what checkpoints/names.py maps to google-research's `bert/embeddings/...`.

    Args:
        vocab_size: int. Rows of the word table (the vocabulary's size).
        hidden_size: int. H, the width of each embedding.
        max_position_embeddings: int. Rows of the position table: sequences may be at most this long.
        type_vocab_size: int. Rows of the token-type (segment) table.
        initializer_range: float. Standard deviation of the truncated-normal initial tables.
        layer_norm_eps: float. LayerNorm epsilon.
        dropout: float. Dropout rate on the normalised sum (BertConfig.hidden_dropout_prob).
        **kwargs: Keras layer arguments (name, dtype, ...).

    Call arguments:
        input_word_ids: [B, S] int32 WordPiece ids.
        input_type_ids: [B, S] int32 segment ids (0 or 1).
        training: bool. Applies dropout when True.
        position_ids: [B, S] int32 or None. Each token's position (a packed row's restart at each sequence's
            [CLS]); None: 0..S-1 in every row.

    Returns:
        [B, S, H] float32.

    Example:
        >>> layer = bert_keras.layers.BertEmbeddings(vocab_size=100, hidden_size=16,
        ...                                          max_position_embeddings=32, type_vocab_size=2)
        >>> ids = np.array([[2, 5, 7, 3, 0]], "int32")
        >>> tuple(layer(ids, np.zeros_like(ids)).shape)
        (1, 5, 16)
    """

    def __init__(self, *, vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                 initializer_range=0.02, layer_norm_eps=1e-12, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout_rate = dropout
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        # lookups and their sum in the tables' dtype (float32 under a mixed policy), not rounded to bfloat16
        table = dict(embeddings_initializer=init, dtype=self.dtype_policy.variable_dtype)
        self.word_embeddings = keras.layers.Embedding(vocab_size, hidden_size, name="word_embeddings", **table)
        self.position_embeddings = keras.layers.Embedding(max_position_embeddings, hidden_size,
                                                          name="position_embeddings", **table)
        self.token_type_embeddings = keras.layers.Embedding(type_vocab_size, hidden_size,
                                                            name="token_type_embeddings", **table)
        self.layer_norm = _layer_norm(layer_norm_eps, "layer_norm")
        self.dropout = keras.layers.Dropout(dropout, autocast=False)     # on the float32 LayerNorm output

    def build(self, input_shape=None):
        self.word_embeddings.build((None, None))
        self.position_embeddings.build((None,))
        self.token_type_embeddings.build((None, None))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=False, position_ids=None):
        if position_ids is None:
            positions = self.position_embeddings(ops.arange(ops.shape(input_word_ids)[1]))[None]      # [1, S, H]
        else:
            positions = self.position_embeddings(position_ids)                                        # [B, S, H]
        x = self.word_embeddings(input_word_ids) + positions + self.token_type_embeddings(input_type_ids)
        return self.dropout(self.layer_norm(x), training=training)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_size": self.type_vocab_size, "initializer_range": self.initializer_range,
                "layer_norm_eps": self.layer_norm_eps, "dropout": self.dropout_rate}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerBlock(keras.layers.Layer):
    """One BERT layer: self-attention, add & LayerNorm, feed-forward, add & LayerNorm (post-LN).

    As google-research/bert's `transformer_model` body: N heads of size D = H / N, scores scaled by 1 / sqrt(D),
    padding keys masked with -10000 (`attention_bias`), softmax and both LayerNorms in float32. Position-wise
    parts run on the real tokens only (`RealTokens`), so padding costs no dense work outside XLA; outputs at
    padding are 0. Hyper-parameters are keyword-only, so two dropout rates cannot be swapped silently.

    Args:
        hidden_size: int. H, the width of the token vectors in and out.
        num_attention_heads: int. N; `hidden_size` must be a multiple of it.
        intermediate_size: int. I, the feed-forward width.
        hidden_act: str. Feed-forward activation: "gelu" (exact erf), "gelu_new" (tanh form) or a Keras name.
        hidden_dropout: float. Dropout on the attention output and the feed-forward output (residual branches).
        attention_dropout: float. Dropout on the attention probabilities.
        initializer_range: float. Standard deviation of the truncated-normal initial kernels.
        layer_norm_eps: float. LayerNorm epsilon.
        **kwargs: Keras layer arguments (name, dtype, ...).

    Call arguments:
        x: [B, S, H] float32 token vectors.
        input_mask: [B, S] int, 1 for tokens, 0 for padding.
        training: bool. Applies dropout when True.
        cls_only: bool. Only position 0 ([CLS]) is computed past attention: returns [B, 1, H].
        return_attention: bool. Also return the attention probabilities (after the softmax, before dropout).
        packed_sequence_ids: [B, S] int or None. For rows packed with several sequences: which sequence each
            token is in (1..k, 0 at padding); attention then stays within each sequence (`packed_attention_bias`).
            Not with `cls_only`.

    Returns:
        [B, S, H] float32 ([B, 1, H] with `cls_only`). With `return_attention`, (that, probabilities [B, N, S, S]
        float32 ([B, N, 1, S] with `cls_only`)): each query row sums to 1, keys at padding get exp(-10000) = 0,
        rows of padding queries are arbitrary (uniform over the real keys outside XLA).

    Example:
        >>> block = bert_keras.layers.TransformerBlock(hidden_size=16, num_attention_heads=2,
        ...                                            intermediate_size=64)
        >>> x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
        >>> mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
        >>> tuple(block(x, mask).shape), tuple(block(x, mask, cls_only=True).shape)
        ((2, 5, 16), (2, 1, 16))
        >>> out, probs = block(x, mask, return_attention=True)
        >>> tuple(probs.shape), float(probs[1, 0, 0, 3])            # [B, N, S, S]; a padding key gets 0
        ((2, 2, 5, 5), 0.0)
    """

    def __init__(self, *, hidden_size, num_attention_heads, intermediate_size, hidden_act="gelu",
                 hidden_dropout=0.1, attention_dropout=0.1, initializer_range=0.02, layer_norm_eps=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.head_size = hidden_size // num_attention_heads
        dense = lambda units, name, act=None: _dense(units, initializer_range, name, act)  # noqa: E731
        self.query = dense(hidden_size, "query")
        self.key = dense(hidden_size, "key")
        self.value = dense(hidden_size, "value")
        self.attention_output = dense(hidden_size, "attention_output")
        self.attention_norm = _layer_norm(layer_norm_eps, "attention_layer_norm")
        self.intermediate = dense(intermediate_size, "intermediate", activation_fn(hidden_act))
        self.output_dense = dense(hidden_size, "output")
        self.output_norm = _layer_norm(layer_norm_eps, "output_layer_norm")
        # autocast=False: dropout in its input's dtype, float32 under a mixed policy (see call)
        self.attention_probs_dropout = keras.layers.Dropout(attention_dropout, autocast=False)
        self.output_dropout = keras.layers.Dropout(hidden_dropout, autocast=False)

    def build(self, input_shape=None):
        h = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.attention_output, self.intermediate):
            layer.build(h)
        self.output_dense.build((None, None, self.intermediate_size))
        self.attention_norm.build(h)
        self.output_norm.build(h)
        self.built = True

    @property
    def input_dtype(self):
        """The dtype Keras casts x to on the way in: the variables' (float32 under a mixed precision policy), not
        Keras' default, the compute dtype, which would round the residual stream to bfloat16 at every block."""
        return self.dtype_policy.variable_dtype

    def _split_heads(self, x):                                      # [B, S, H] -> [B, N, S, D]
        return swap_heads(ops.reshape(x, _reshape_target(x, (self.num_attention_heads, self.head_size))))

    def _queries_keys_values(self, x, h, tokens, b, s, cls_only):
        """The projections q [B, Sq, H], k and v [B, S, H] of h [T, H] (q of [CLS] alone with cls_only). Under
        `litert_layers()` the projections of h are one matmul over the concatenated kernels, which the LiteRT
        converter folds into one constant: int8 quantizes the input once instead of three times, and the GEMM
        is wider. Elsewhere the kernels are variables, which that concat would copy on every call."""
        dense = [self.key, self.value] if cls_only else [self.query, self.key, self.value]
        if _trace.litert:
            kernel = ops.concatenate([d.kernel for d in dense], axis=1)
            bias = ops.concatenate([d.bias for d in dense], axis=0)
            projected = ops.split(ops.matmul(h, kernel) + bias, len(dense), axis=-1)
        else:
            projected = [d(h) for d in dense]
        projected = [tokens.scatter(t, b, s) for t in projected]
        return ([self.query(x[:, 0])[:, None]] if cls_only else []) + projected

    def call(self, x, input_mask, training=False, cls_only=False, return_attention=False, packed_sequence_ids=None):
        """cls_only: only position 0 ([CLS]) queries, and only its row goes through the output projection,
        LayerNorms and feed-forward: -> [B, 1, H], all a pooled output needs (Model Garden's output_range=1).
        return_attention: -> (that, the float32 probabilities [B, N, Sq, S]); off, nothing more is traced.
        packed_sequence_ids: the block-diagonal mask of packed rows instead of the padding mask. RealTokens still
        drops padding (input_mask) from the position-wise parts: it moves tokens, never mixes them, so it is exact
        for packed rows too."""
        if cls_only and packed_sequence_ids is not None:
            raise ValueError("cls_only computes one [CLS] a row; a packed row has one per sequence")
        bias = attention_bias(input_mask) if packed_sequence_ids is None else packed_attention_bias(
            packed_sequence_ids)
        b, s = ops.shape(x)[0], ops.shape(x)[1]
        tokens = RealTokens(input_mask)             # the dense parts run on real tokens only (see RealTokens)
        h = tokens.gather(x)                                        # [T, H]: T real tokens (or [B, S, H])
        q, k, v = (self._split_heads(t) for t in self._queries_keys_values(x, h, tokens, b, s, cls_only))
        # scale, softmax and dropout in float32 (on a CPU bfloat16 element-wise ops are slower: in_float32)
        scores = ops.cast(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), "float32") * (1.0 / self.head_size ** 0.5)
        weights = ops.softmax(scores + bias, axis=-1)                                          # [B, N, Sq, S]
        probs = ops.cast(self.attention_probs_dropout(weights, training=training), v.dtype)
        context = swap_heads(ops.matmul(probs, v))                                          # [B, Sq, N, D]
        context = ops.reshape(context, _reshape_target(context, (self.hidden_size,), keep=1))
        if cls_only:
            h, context = x[:, 0], context[:, 0]                                              # [B, H]
        else:
            context = tokens.gather(context)
        attended = self.output_dropout(ops.cast(self.attention_output(context), h.dtype), training=training)
        h = self.attention_norm(h + attended)
        ffn = self.output_dropout(ops.cast(self.output_dense(self.intermediate(h)), h.dtype), training=training)
        out = self.output_norm(h + ffn)
        out = out[:, None] if cls_only else tokens.scatter(out, b, s)
        return (out, weights) if return_attention else out

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_attention_heads": self.num_attention_heads, "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act, "hidden_dropout": self.hidden_dropout,
                "attention_dropout": self.attention_dropout, "initializer_range": self.initializer_range,
                "layer_norm_eps": self.layer_norm_eps}


def _reshape_target(x, tail, keep=2):
    """The shape for reshaping x to its first `keep` dims followed by `tail`, as constant as x's static shape
    allows: one unknown dim becomes -1, so the shape is a constant where x's batch is static (LiteRT's XNNPACK
    delegates a reshape only when its shape is a constant). keep=1 merges the rest into -1 and `tail`."""
    dims = [x.shape[i] for i in range(keep)] + ([None] if keep == 1 else [])
    if sum(d is None for d in dims) <= 1:
        return tuple(-1 if d is None else d for d in dims) + tuple(tail)
    dynamic = [ops.shape(x)[i] if d is None else d for i, d in enumerate(dims[:keep])]
    return tuple(dynamic) + ((-1,) if keep == 1 else ()) + tuple(tail)


_SAME_WIDTH_INT = {tf.float32: tf.int32, tf.bfloat16: tf.int16, tf.float16: tf.int16}
_PER_FLOAT64 = {tf.float32: 2, tf.bfloat16: 4, tf.float16: 4}       # elements that make one float64's 8 bytes


class _TraceFlags(threading.local):
    """How the layers trace in this thread: set by integer_head_swaps() and litert_layers(), read while tracing."""
    integer_swaps = False           # swap_heads through the same-width integer view
    litert = False                  # plain transposes, one Q/K/V matmul
    one_sequence = False            # RealTokens as constant-shape reshapes


_trace = _TraceFlags()


@contextlib.contextmanager
def _tracing(**flags):
    """Sets _trace's `flags` within the block, restoring the previous values after it."""
    previous = {name: getattr(_trace, name) for name in flags}
    for name, value in flags.items():
        setattr(_trace, name, value)
    try:
        yield
    finally:
        for name, value in previous.items():
            setattr(_trace, name, value)


@contextlib.contextmanager
def integer_head_swaps():
    """Within this block `swap_heads` moves its bits as integers, not as float64 (TPUs get this view on their own:
    no float64 there). benchmarks/benchmark_head_swap.py measures it on CPU.

    Example:
        >>> with integer_head_swaps():          # doctest: +SKIP
        ...     function = tf.function(model.serve).get_concrete_function(spec)
    """
    with _tracing(integer_swaps=True):
        yield


@contextlib.contextmanager
def litert_layers(one_sequence: bool = False):
    """Within this block the layers trace for a LiteRT conversion, where the weights become constants and XNNPACK
    runs the parts of the graph it can take (it splits the graph at every op it cannot):
      - `swap_heads` is a plain float32 transpose (LiteRT has no float64 TRANSPOSE; XNNPACK takes float32 ones);
      - a block's Q, K and V projections are one matmul over the concatenated kernels (folded into one constant);
      - with `one_sequence=True`, for inputs of one sequence with no padding and a static batch: the
        position-wise parts run on [B * S, C] by constant-shape reshapes instead of gathering the real tokens
        (GATHER and SCATTER_ND are not XNNPACK ops). With padding the outputs at real positions stay the same,
        and padding positions are computed instead of 0.

    Args:
        one_sequence: bool. Trace the dense form (see above).

    Example:
        >>> with litert_layers(one_sequence=True):          # doctest: +SKIP
        ...     function = tf.function(model.serve).get_concrete_function(tf.TensorSpec([1], tf.string))
    """
    with _tracing(litert=True, one_sequence=one_sequence):
        yield


def _bit_view(dtype):
    """The dtype (and elements per item) a head swap moves `dtype`'s bits as: float64 on TensorFlow's CPU runtime,
    the same-width integer under `integer_head_swaps()` or a TPUStrategy, None (a plain transpose) under
    `litert_layers()` and for other dtypes."""
    if _trace.litert:
        return None
    strategy = tf.distribute.get_strategy()
    if _trace.integer_swaps or isinstance(strategy, (tf.distribute.TPUStrategy,
                                                                     tf.distribute.experimental.TPUStrategy)):
        return (_SAME_WIDTH_INT[dtype], 1) if dtype in _SAME_WIDTH_INT else None
    return (tf.float64, _PER_FLOAT64[dtype]) if dtype in _PER_FLOAT64 else None


def swap_heads(x):
    """[B, S, N, D] <-> [B, N, S, D] (the permutation (0, 2, 1, 3) is its own inverse). On TensorFlow the bits move
    as float64 (`tf_swap_heads`); on JAX and PyTorch it is a plain transpose (XLA fuses it into the matmuls)."""
    return tf_swap_heads(x) if on_tensorflow() else ops.transpose(x, (0, 2, 1, 3))


@tf.custom_gradient
def tf_swap_heads(x):
    """TensorFlow's `swap_heads`: [B, S, N, D] <-> [B, N, S, D], the bits moved as float64.

    Why: with oneDNN on (bert_keras turns it on; TF's default on AVX-512 x86) a float32/bfloat16 Transpose becomes
    _MklTranspose, which sets up a reorder per call and dominates small requests; TF's own transpose of the same
    bits viewed as another dtype does not (Bitcast is a free view; docs/performance.md). The view is float64,
    D/2 float32 pairs (D/4 bfloat16 quads) per row: oneDNN leaves float64 alone, where an integer transpose makes
    TF log "oneDNN supports DT_INT32 only on platforms with AVX-512" on CPUs without AVX-512. Only moves touch
    the bits (no arithmetic), so any bit pattern comes out unchanged. D not divisible by the pair (quad) size:
    the same-width integer view. The gradient is the same swap of the upstream gradient (Bitcast alone has none).
    """
    def swap(t):
        view = _bit_view(t.dtype)
        if view is None:
            return tf.transpose(t, (0, 2, 1, 3))
        dtype, per_item = view
        if per_item > 1 and (t.shape[-1] is None or t.shape[-1] % per_item):
            dtype, per_item = _SAME_WIDTH_INT[t.dtype], 1
        if per_item == 1:
            return tf.bitcast(tf.transpose(tf.bitcast(t, dtype), (0, 2, 1, 3)), t.dtype)
        b, s, n, _ = tf.unstack(tf.shape(t))                  # D is static: t.shape[-1]
        items = tf.bitcast(tf.reshape(t, [b, s, n, t.shape[-1] // per_item, per_item]), dtype)   # [B, S, N, D/k]
        return tf.reshape(tf.bitcast(tf.transpose(items, (0, 2, 1, 3)), t.dtype), [b, n, s, t.shape[-1]])
    return swap(x), swap


class RealTokens:
    """Skips padding in the position-wise parts of a block (projections, feed-forward, LayerNorm): gather(x)
    takes [B, S, C] to [T, C], the T real tokens; scatter(t, B, S) puts them back, zeros at padding. Real SST-2
    batches are half padding, so this halves the work of a block; attention still sees [B, S] with the mask.
    With no padding to skip, the gather and scatters are pure overhead (docs/performance.md).

    Under XLA (jit_compile, TPU, and always on JAX and PyTorch) shapes must be static: there both are the
    identity and padding is computed, as google-research does. Under `litert_layers(one_sequence=True)` (a LiteRT graph of one unpadded sequence)
    both are constant-shape reshapes between [B, S, C] and [B * S, C], which XNNPACK takes. Outputs at real
    positions are the same every way; at padding they are 0 here.
    """

    def __init__(self, input_mask):
        self.index, self.mask = None, input_mask
        self.flat = _trace.one_sequence
        if not self.flat and on_tensorflow() and not control_flow_util.GraphOrParentsInXlaContext(
                tf.compat.v1.get_default_graph()):
            self.index = tf.where(tf.reshape(input_mask, [-1]) > 0)[:, 0]      # [T] into the flat B * S

    def gather(self, x):
        """[B, S, C] -> [T, C], the real tokens in row-major order (x itself under XLA, [B * S, C] flat)."""
        if self.flat:
            return tf.reshape(x, [-1, x.shape[-1]])
        if self.index is None:
            return x
        return tf.gather(tf.reshape(x, [-1, x.shape[-1]]), self.index)

    def scatter(self, t, b, s):
        """[T, C] -> [B, S, C], zeros at padding: the inverse of gather (t itself under XLA)."""
        if self.flat:
            return tf.reshape(t, _reshape_target(self.mask, (t.shape[-1],), keep=1))
        if self.index is None:
            return t
        c = t.shape[-1]
        flat = tf.scatter_nd(self.index[:, None], t, tf.stack([tf.cast(b * s, tf.int64), c]))
        return tf.reshape(flat, [b, s, c])


def padding_bias(input_mask):
    """[B, S] mask (1 = token, 0 = padding) -> [B, S] additive float32 bias (0 or -10000): a softmax over
    positions gives padding weight exp(-10000) = 0. The -10000 is google-research/bert's."""
    return (1.0 - ops.cast(input_mask, "float32")) * -10000.0


def attention_bias(input_mask):
    """[B, S] mask -> [B, 1, 1, S]: padding_bias broadcast over heads and queries, so no key is padding."""
    return ops.expand_dims(ops.expand_dims(padding_bias(input_mask), 1), 1)


def packed_attention_bias(packed_sequence_ids):
    """[B, S] sequence ids of packed rows (1..k, 0 at padding) -> [B, 1, S, S] float32 bias, broadcast over
    heads: 0 where query and key are in the same sequence, -10000 elsewhere (other sequences, padding keys), so
    each sequence attends only to itself, block-diagonal. Its keys' weights are then those of the same sequence
    alone in a padded row (exp(-10000) = 0 either way). A padding query (id 0) has every key masked; its row is
    arbitrary, as padding rows are unpacked."""
    ids = ops.cast(packed_sequence_ids, "int32")
    same = ops.logical_and(ops.equal(ids[:, :, None], ids[:, None, :]), ids[:, None, :] > 0)        # [B, S, S]
    return ops.expand_dims((1.0 - ops.cast(same, "float32")) * -10000.0, 1)
