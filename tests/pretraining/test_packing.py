"""The sequence packer: near the packing limit on the published Wikipedia-512 histogram, and on any lengths every
sequence placed exactly once, rows within bounds, the same rows for the same input."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wikipedia_histogram import WIKIPEDIA_512

from bert_keras.pretraining.packing import pack_histogram, pack_lengths


def check_rows(rows: np.ndarray, lengths: np.ndarray, max_seq_length: int, depth: int):
    """Every sequence in exactly one row, whole rows within max_seq_length and depth, each row ascending and the
    rows ordered by their first sequence."""
    assert rows.ndim == 2 and rows.shape[1] == depth
    placed = np.sort(rows[rows >= 0])
    np.testing.assert_array_equal(placed, np.arange(len(lengths)))
    real = rows >= 0
    assert real[:, 0].all()                                          # no empty row
    assert (real[:, :-1] | ~real[:, 1:]).all()                       # -1 only after the row's sequences
    assert (np.where(real, lengths[np.maximum(rows, 0)], 0).sum(1) <= max_seq_length).all()
    a, b = rows[:, :-1], rows[:, 1:]
    assert ((b < 0) | (a < b)).all()
    assert (np.diff(rows[:, 0]) > 0).all()


def test_wikipedia_512_histogram_reaches_1_99x_at_3_per_row():
    histogram = np.array(WIKIPEDIA_512)
    start = time.perf_counter()
    strategies, counts = pack_histogram(histogram, 512)
    seconds = time.perf_counter() - start
    assert seconds < 5                                               # ~0.04 s on an idle core
    tokens_of = strategies.sum(1)
    assert (tokens_of <= 512).all() and ((strategies > 0).sum(1) <= 3).all()
    # every sequence of the histogram in exactly one row
    placed = np.zeros(513, np.int64)
    np.add.at(placed, strategies.reshape(-1), np.repeat(counts, 3))
    np.testing.assert_array_equal(placed[1:], histogram)
    sequences, rows = histogram.sum(), counts.sum()
    limit = sequences / ((histogram * np.arange(1, 513)).sum() / 512)
    assert round(limit, 4) == 2.0013                                 # the published limit
    assert sequences / rows >= 1.99                                  # measured: 1.9947 (NNLSHP: 1.9962)


def test_sequences_dealt_out_on_a_sample_of_the_histogram():
    """pack_lengths on 1/100 of the Wikipedia histogram's sequences (163k), in shuffled order: the packer's rows
    on real lengths, with the sequences themselves."""
    histogram = np.array(WIKIPEDIA_512) // 100
    lengths = np.random.default_rng(0).permutation(np.repeat(np.arange(1, 513), histogram))
    rows = pack_lengths(lengths, 512)
    check_rows(rows, lengths, 512, 3)
    assert len(lengths) / len(rows) >= 1.98


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40).flatmap(lambda max_len: st.tuples(
    st.just(max_len), st.lists(st.integers(1, max_len), max_size=60), st.integers(1, 3))))
def test_any_lengths_each_sequence_once_rows_within_bounds_deterministic(case):
    max_seq_length, lengths, depth = case
    lengths = np.array(lengths, np.int64)
    rows = pack_lengths(lengths, max_seq_length, depth)
    check_rows(rows, lengths, max_seq_length, depth)
    np.testing.assert_array_equal(pack_lengths(lengths.copy(), max_seq_length, depth), rows)
    # never more rows than one per sequence, never fewer than the tokens need
    assert np.ceil(lengths.sum() / max_seq_length) <= len(rows) <= len(lengths)
    if depth == 1:
        np.testing.assert_array_equal(rows[:, 0], np.arange(len(lengths)))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=30))
def test_rows_depend_on_the_lengths_in_order_alone(lengths):
    """A row's sequences are those of the same positions whatever the other content: the packer sees lengths
    only. Reordering the input by a permutation permutes which sequences fill the same kinds of rows."""
    lengths = np.array(lengths)
    rows = pack_lengths(lengths, 8)
    kinds = sorted(tuple(sorted(lengths[r[r >= 0]].tolist())) for r in rows)
    shuffled = np.random.default_rng(len(lengths)).permutation(lengths)
    rows_shuffled = pack_lengths(shuffled, 8)
    assert sorted(tuple(sorted(shuffled[r[r >= 0]].tolist())) for r in rows_shuffled) == kinds


def test_bad_input_is_an_error_naming_the_fix():
    with pytest.raises(ValueError, match="1 to max_seq_length = 8"):
        pack_lengths([3, 9], 8)
    with pytest.raises(ValueError, match="1 to max_seq_length"):
        pack_lengths([0, 3], 8)
    with pytest.raises(ValueError, match="1, 2 or 3"):
        pack_lengths([3], 8, max_sequences_per_row=4)
    with pytest.raises(ValueError, match=r"\[max_seq_length\] = \[8\]"):
        pack_histogram([1, 2], 8)
    assert pack_lengths(np.zeros(0, np.int64), 8).shape == (0, 3)
