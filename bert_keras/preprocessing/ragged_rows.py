"""Which row each value of a flat ragged tensor belongs to, from its row splits, in raw ops.

Shared by the tokenizer and the packer. Called eagerly (a notebook, the pretraining data tool), every op costs
Python time: tf.searchsorted reshapes and reads shapes with several ops, UpperBound needs only
expand_dims/squeeze around it. In a graph both are the same kernel.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import gen_array_ops


def row_ids(splits, num_values):
    """Row splits [R + 1] -> the row of each of the num_values values [V] (int64)."""
    return upper_bound(splits, tf.range(num_values, dtype=splits.dtype)) - 1


def upper_bound(sorted_values, values):
    """[S] ascending, [V] -> [V] int64: how many of sorted_values are <= each value (tf.searchsorted with
    side="right")."""
    return tf.squeeze(gen_array_ops.upper_bound(tf.expand_dims(sorted_values, 0), tf.expand_dims(values, 0),
                                                out_type=tf.int64), [0])


def splits_from_lengths(lengths):
    """Row lengths [R] -> row splits [R + 1] (int64)."""
    return tf.concat([tf.zeros([1], tf.int64), tf.cumsum(tf.cast(lengths, tf.int64))], 0)


def position_in_row(splits, num_values=None):
    """Row splits [R + 1] -> each value's position in its row [V] (int64); num_values defaults to splits[-1]."""
    num_values = splits[-1] if num_values is None else num_values
    return tf.range(num_values, dtype=splits.dtype) - tf.gather(splits, row_ids(splits, num_values))
