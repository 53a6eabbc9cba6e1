"""tools/parity/dropout_replay.py's tensorflow_uniform_at (jax.numpy, uint32 only) against TensorFlow's own
tf.random.stateless_uniform, which Keras' Dropout draws from on TensorFlow: the same numbers, bit for bit, for
seeds across the two 32-bit words' range and shapes whose sizes are and are not multiples of Philox's 4 words."""

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.jax


@pytest.mark.parametrize("seed", [(3, 0), (7, 12), (14, 2**31 + 5), (2**32 - 1, 1)])
def test_jax_computes_tensorflows_stateless_uniform(seed):
    import jax.numpy as jnp

    from dropout_replay import tensorflow_uniform_at
    for shape in [(5,), (3, 7), (2, 4, 33, 9)]:
        theirs = tf.random.stateless_uniform(shape, seed=tf.constant(seed, tf.int64)).numpy()
        index = jnp.arange(int(np.prod(shape)), dtype=jnp.int32).reshape(shape)
        np.testing.assert_array_equal(np.asarray(tensorflow_uniform_at(index, seed)), theirs)
    # elements drawn out of order: each is its own number
    index = jnp.asarray([[11, 0], [3, 4]], jnp.int32)
    theirs = tf.random.stateless_uniform((12,), seed=tf.constant(seed, tf.int64)).numpy()
    np.testing.assert_array_equal(np.asarray(tensorflow_uniform_at(index, seed)), theirs[np.asarray(index)])
