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


def row_char_offsets(texts, rows, byte_offsets):
    """Byte offsets into texts[rows] -> character offsets, in time linear in the texts' bytes (char_offsets cuts
    a prefix per offset: quadratic for the thousands of tokens of a long text); -1 stays -1.

    Characters are counted as tf.strings.length(unit="UTF8_CHAR") counts them: the bytes that are not UTF-8
    continuation bytes (0x80-0xBF).

    Args:
        texts: [B] strings.
        rows: [V] int, the text of each offset.
        byte_offsets: [V] int, a byte offset into its text (-1 for none).

    Returns:
        [V] int64 character offsets.

    Example:
        >>> row_char_offsets(tf.constant(["Zürich", "ab"]), tf.constant([0, 0, 1]), tf.constant([3, -1, 2])).numpy()
        array([ 2, -1,  2])
    """
    raw = tf.io.decode_raw(tf.strings.reduce_join(texts), tf.uint8)                  # every text's bytes, in a row
    starts_char = tf.not_equal(tf.bitwise.bitwise_and(raw, 0xC0), 0x80)
    before = tf.concat([[0], tf.cumsum(tf.cast(starts_char, tf.int64))], 0)           # characters before each byte
    base = tf.concat([[0], tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64))], 0)  # each text's first byte
    offsets, at = tf.cast(byte_offsets, tf.int64), tf.gather(base, tf.cast(rows, tf.int64))
    chars = tf.gather(before, at + tf.maximum(offsets, 0)) - tf.gather(before, at)
    return tf.where(offsets >= 0, chars, -1)


def byte_offsets(texts, chars):
    """texts [B]; a character offset into each [B] (-1 stays -1) -> UTF-8 byte offsets [B] int64."""
    chars = tf.cast(chars, tf.int64)
    prefix = tf.strings.substr(texts, tf.zeros_like(chars), tf.maximum(chars, 0), unit="UTF8_CHAR")
    return tf.where(chars >= 0, tf.cast(tf.strings.length(prefix), tf.int64), -1)
