"""Offsets into texts, between UTF-8 bytes (what the tokenizer and the span decoder work in) and characters (what
people and Python strings count), in-graph."""

from __future__ import annotations

import tensorflow as tf


def char_offsets(texts, byte_offsets):
    """texts [B]; byte offsets into each text [B, T] -> character offsets (code points) [B, T]; -1 stays -1."""
    b = tf.shape(byte_offsets)[0]
    rows = tf.repeat(texts, tf.shape(byte_offsets)[1])
    flat = tf.reshape(byte_offsets, [-1])
    chars = tf.strings.length(tf.strings.substr(rows, tf.zeros_like(flat), tf.maximum(flat, 0)), unit="UTF8_CHAR")
    return tf.reshape(tf.where(flat >= 0, tf.cast(chars, tf.int64), -1), [b, -1])


def byte_offsets(texts, chars):
    """texts [B]; a character offset into each [B] (-1 stays -1) -> UTF-8 byte offsets [B] int64."""
    chars = tf.cast(chars, tf.int64)
    prefix = tf.strings.substr(texts, tf.zeros_like(chars), tf.maximum(chars, 0), unit="UTF8_CHAR")
    return tf.where(chars >= 0, tf.cast(tf.strings.length(prefix), tf.int64), -1)
