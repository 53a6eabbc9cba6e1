import itertools

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.preprocessing.packer import pack_segments

CLS, SEP = 101, 102


def _google_truncate(segments, budget):
    """google-research's _truncate_seq_pair, for any number of segments: pop from the longest, later on ties."""
    segments = [list(s) for s in segments]
    while sum(map(len, segments)) > budget:
        longest = max(range(len(segments)), key=lambda i: (len(segments[i]), i))
        segments[longest].pop()
    return segments


def _reference(segments, length, pad_id=0):
    kept = _google_truncate(segments, length - len(segments) - 1)
    ids, types = [CLS], [0]
    for i, seg in enumerate(kept):
        ids += seg + [SEP]
        types += [i] * (len(seg) + 1)
    pad = length - len(ids)
    return ids + [pad_id] * pad, [1] * len(ids) + [0] * pad, types + [0] * pad


@pytest.mark.parametrize("truncation", ["round_robin", "longest_first"])
def test_truncation_matches_google_research_for_every_small_case(truncation):
    cases = [lens for lens in itertools.product(range(6), repeat=3)]
    for n in (1, 2, 3):
        for length in (n + 2, 7, 9, 12):
            segs = [[[100 * (i + 1) + k for k in range(lens[i])] for lens in cases] for i in range(n)]
            got = pack_segments([tf.ragged.constant(s, dtype=tf.int32) for s in segs], CLS, SEP,
                                seq_length=length, truncation=truncation)
            for row, lens in enumerate(cases):
                want = _reference([segs[i][row] for i in range(n)], length)
                assert got["input_word_ids"][row].numpy().tolist() == want[0], (n, length, lens)
                assert got["input_mask"][row].numpy().tolist() == want[1]
                assert got["input_type_ids"][row].numpy().tolist() == want[2]


@pytest.mark.parametrize("call_time_length", [False, True])
def test_any_pad_id_and_a_length_chosen_at_call_time(call_time_length):
    """One segment takes its own short path (packer._pack_one), more segments the general one: both against the
    reference with a pad id other than 0, and with the length a scalar tensor (TF Hub's seq_length=N)."""
    cases = [[[100 * (i + 1) + k for k in range(n)] for n in (0, 1, 3, 6, 9)] for i in range(2)]
    for n in (1, 2):
        for length in (n + 2, 8):
            seq_length = tf.constant(length) if call_time_length else length
            got = pack_segments([tf.ragged.constant(s, dtype=tf.int32) for s in cases[:n]], CLS, SEP,
                                seq_length=seq_length, pad_id=7)
            for row in range(5):
                want = _reference([cases[i][row] for i in range(n)], length, pad_id=7)
                assert got["input_word_ids"][row].numpy().tolist() == want[0], (n, length, row)
                assert got["input_mask"][row].numpy().tolist() == want[1]
                assert got["input_type_ids"][row].numpy().tolist() == want[2]


def test_dynamic_length_pads_to_a_multiple_of_8_within_the_maximum():
    a = tf.ragged.constant([[5] * 3, [6] * 10], dtype=tf.int32)
    out = pack_segments([a], CLS, SEP)
    assert out["input_word_ids"].shape == (2, 16)                      # longest 12 -> 16
    assert out["input_mask"].numpy().sum(axis=1).tolist() == [5, 12]
    long = tf.ragged.constant([[7] * 600], dtype=tf.int32)
    assert pack_segments([long], CLS, SEP, max_seq_length=512)["input_word_ids"].shape == (1, 512)


def test_too_short_a_length_is_refused():
    with pytest.raises(ValueError, match="shorter than the 3 special tokens"):
        pack_segments([tf.ragged.constant([[1]]), tf.ragged.constant([[1]])], CLS, SEP, seq_length=2)
    with pytest.raises(ValueError, match="truncation"):
        pack_segments([tf.ragged.constant([[1]])], CLS, SEP, truncation="middle")
