"""Static batch shapes for TPU input: a TPU compiles the train step for fixed shapes, and a batch whose shape the
graph cannot see (the preprocessor's reshapes leave dimensions unknown, [None, None]) is rejected there or padded
at a cost. With a fixed sequence length and `drop_remainder` every batch has the same shapes; `with_static_shapes`
says so to the graph (tf.ensure_shape, which also fails loudly if a batch differs)."""

from __future__ import annotations

import tensorflow as tf


def with_static_shapes(ds: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """`ds` with every tensor's shape fixed: the batch dimension to `batch_size`, any other dimension the element
    spec leaves unknown to its size in the first batch (one batch is made to read them, only if needed)."""
    spec = tf.nest.map_structure(lambda s: s.shape, ds.element_spec)
    shapes = tf.nest.map_structure(lambda s: tf.TensorShape([batch_size] + s.as_list()[1:]), spec)
    if not all(s.is_fully_defined() for s in tf.nest.flatten(shapes)):
        shapes = tf.nest.map_structure(lambda t: t.shape, next(iter(ds.take(1))))

    def pin(*element):
        element = element[0] if len(element) == 1 else element
        return tf.nest.map_structure(tf.ensure_shape, element, shapes)
    return ds.map(pin)
