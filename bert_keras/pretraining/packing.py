"""Sequence packing: whole sequences grouped into rows of at most `max_seq_length` tokens and at most 3 sequences,
so that a pretraining batch computes on real tokens instead of padding (issue 49).

Which algorithm, and why. Krell et al., "Efficient sequence packing without cross-contamination" (arXiv
2107.02027; code: graphcore/examples tutorials/blogs_code/packedBERT) observe that sequences of one length are
interchangeable, so packing can be solved on the histogram of lengths (max_seq_length bins) instead of on the N
sequences, in time independent of N; sequences are then dealt out to the chosen combinations ("strategies").
Their two histogram packers, measured here on their Wikipedia-512 histogram (16,279,552 sequences, mean 255.8
tokens; the limit, total tokens / 512, is 2.0013x fewer rows than one sequence per row):

  SPFHP (shortest-pack-first, best fit on the histogram): 1.9934x in 0.03 s, but only with up to 12 sequences
      per row; limited to 3, as our record format and NVIDIA's and Graphcore's MLPerf BERT are, it reaches 1.790x
      (same for its longest-pack-first variant): short sequences end up three to a half-empty row.
  NNLSHP (non-negative least squares over every combination of <= 3 lengths that sums to exactly 512): 1.9962x
      at <= 3, but 24 s in SciPy's NNLS on a 512 x 22,000 matrix (not a dependency of ours).

At 3 sequences a row the Wikipedia histogram leaves almost no room: besides the 3.8M sequences of exactly 512
tokens, the other 12.5M must go about 2.9 to a row, so nearly every row is a triple that fills 512 exactly. We
therefore use an exact-fit-first greedy on the histogram ("least slack first"): for slack s = 0, 1, 2, ... and
for each remaining length l, longest first, form rows of exactly max_seq_length - s tokens led by l: l and two
shorter-or-equal sequences (among the pairs that fit exactly, the one whose scarcer length has the most
sequences left, so plentiful lengths are used first), else l and one, else (when l = max_seq_length - s) l alone;
a combination is repeated as often as the counts allow in one step. Rows with the least padding are formed first
and every sequence is placed by slack max_seq_length - l at the latest. On the Wikipedia-512 histogram this gives
1.9947x fewer rows at <= 3 a row (99.67% real tokens), close to NNLSHP's 1.9962x, in 0.04 s of NumPy on the
histogram (tests/pretraining/test_packing.py checks >= 1.99x); dealing out all 16.3M sequences takes ~10 s
(measured on a busy 2-core machine). Where it is weaker: on Graphcore's SQuAD 1.1 histogram at 384 it reaches
2.116x against NNLSHP's 2.174x (limit 2.232x): with few short sequences, filling the long ones' rows exactly
uses up the short ones that medium-length pairs need later. (Leader-first best fit, the same greedy without the
slack order, reaches 1.9938x on Wikipedia.)

Dealing out (pack_lengths) is deterministic and needs no random draws: the strategies' slots of each length take
the sequences of that length in input order; within a row the sequences keep their input order, and rows are
ordered by their first sequence. The same lengths in the same order give the same rows, whatever else runs.
Packing never splits or changes a sequence: each row holds whole sequences (packed_records.py builds a row).
"""

from __future__ import annotations

import numpy as np

MAX_SEQUENCES_PER_ROW = 3       # NVIDIA's and Graphcore's MLPerf BERT; the packed records' per-sequence slots


def pack_histogram(histogram, max_seq_length: int,
                   max_sequences_per_row: int = MAX_SEQUENCES_PER_ROW) -> tuple[np.ndarray, np.ndarray]:
    """How to pack sequences given only how many there are of each length (the algorithm in the module docstring).

    Args:
        histogram: [max_seq_length] integers, histogram[i] = the number of sequences of i + 1 tokens.
        max_seq_length: int. Tokens per row.
        max_sequences_per_row: int, 1 to 3.

    Returns:
        (strategies [K, max_sequences_per_row] int64: the lengths of one kind of row, longest first, 0 where it
        has fewer sequences; counts [K] int64: how many rows of that kind). counts.sum() is the number of rows and
        every sequence of the histogram is in exactly one of them.

    Example:
        >>> strategies, counts = pack_histogram([0, 1, 0, 2], max_seq_length=4)   # lengths 2, 4, 4
        >>> strategies.tolist(), counts.tolist()
        ([[4, 0, 0], [2, 0, 0]], [2, 1])
    """
    _check_depth(max_sequences_per_row)
    histogram = np.asarray(histogram)
    if histogram.shape != (max_seq_length,) or not np.issubdtype(histogram.dtype, np.integer):
        raise ValueError(f"the histogram must be [max_seq_length] = [{max_seq_length}] integers, got "
                         f"{histogram.shape} {histogram.dtype}")
    if (histogram < 0).any():
        raise ValueError("the histogram has negative counts")
    count = np.zeros(max_seq_length + 1, np.int64)              # count[l]: sequences of l tokens left
    count[1:] = histogram
    lengths = np.arange(max_seq_length + 1)
    rows: dict[tuple, int] = {}
    for slack in range(max_seq_length):
        total = max_seq_length - slack                           # the rows formed now hold exactly this many tokens
        for leader in np.nonzero(count[:total + 1])[0][::-1].tolist():
            while count[leader]:
                rest = _best_rest(count, lengths, leader, total - leader, max_sequences_per_row)
                if rest is None:
                    break
                row = (leader, *rest)
                need = {length: row.count(length) for length in row}
                times = min(int(count[length]) // n for length, n in need.items())
                for length, n in need.items():
                    count[length] -= times * n
                rows[row] = rows.get(row, 0) + times
    assert not count.any(), "every length is placed by slack max_seq_length - length"
    strategies = np.zeros((len(rows), max_sequences_per_row), np.int64)
    for i, row in enumerate(rows):
        strategies[i, :len(row)] = row
    return strategies, np.fromiter(rows.values(), np.int64, len(rows))


def _best_rest(count: np.ndarray, lengths: np.ndarray, leader: int, gap: int, depth: int):
    """What fills a row led by `leader` with exactly `gap` more tokens, from sequences no longer than the leader
    (the leader itself is one of count[leader]): two (when depth allows; among the pairs that fit, the one whose
    scarcer length has the most sequences left, the shortest first on a tie), else one, else nothing when gap is
    0. None when nothing fits exactly."""
    if gap == 0:
        return ()
    if depth >= 3:
        a = lengths[max(1, gap - leader):gap // 2 + 1]            # a <= b = gap - a <= leader
        b = gap - a
        have_a, have_b = count[a] - (a == leader), count[b] - (b == leader)
        fits = (have_a > 0) & (have_b > 0) & ((a != b) | (have_a >= 2))
        if fits.any():
            i = int(np.argmax(np.where(fits, np.minimum(have_a, have_b), -1)))
            return int(b[i]), int(a[i])
    if depth >= 2 and gap <= leader and count[gap] - (gap == leader) > 0:
        return (gap,)
    return None


def pack_lengths(lengths, max_seq_length: int, max_sequences_per_row: int = MAX_SEQUENCES_PER_ROW) -> np.ndarray:
    """Sequences (by their lengths) -> rows of at most `max_seq_length` tokens and `max_sequences_per_row`
    sequences: pack_histogram's strategies dealt out deterministically (module docstring).

    Args:
        lengths: [N] integers, 1 to max_seq_length: each sequence's tokens.
        max_seq_length: int. Tokens per row.
        max_sequences_per_row: int, 1 to 3.

    Returns:
        [R, max_sequences_per_row] int64: each row's sequences as indices into `lengths`, ascending, then -1.
        Every index 0..N-1 is in exactly one row; rows are ordered by their first index.

    Example:
        >>> pack_lengths([3, 1, 4, 1], max_seq_length=5).tolist()   # 3 + 1 tokens and 4 + 1
        [[0, 3, -1], [1, 2, -1]]
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not (np.issubdtype(lengths.dtype, np.integer) or lengths.size == 0):
        raise ValueError(f"lengths must be a list of integers, got shape {lengths.shape} {lengths.dtype}")
    lengths = lengths.astype(np.int64)
    if lengths.size and (lengths.min() < 1 or lengths.max() > max_seq_length):
        raise ValueError(f"every length must be 1 to max_seq_length = {max_seq_length}, got "
                         f"{lengths.min()} to {lengths.max()}")
    histogram = np.bincount(lengths, minlength=max_seq_length + 1)[1:]
    strategies, counts = pack_histogram(histogram, max_seq_length, max_sequences_per_row)
    # The slots of each length (in strategy order) take that length's sequences in input order: both sides,
    # sorted stably by length, hold the same number of each length. (uint16 keys: NumPy's stable sort of small
    # integers is a radix sort, O(N).)
    key = np.uint16 if max_seq_length < 2 ** 16 else np.int64
    slots = np.repeat(strategies.astype(key), counts, axis=0).reshape(-1)   # [R * depth] lengths, 0 = empty
    used = np.flatnonzero(slots)
    sequence = np.full(slots.shape, -1, np.int64)
    sequence[used[np.argsort(slots[used], kind="stable")]] = np.argsort(lengths.astype(key), kind="stable")
    rows = sequence.reshape(-1, max_sequences_per_row)
    # Within a row ascending (-1 last), rows by their first sequence (each index is in one row: no ties).
    rows = np.where(rows < 0, len(lengths), rows)
    for i, j in ((0, 1), (1, 2), (0, 1))[:3 if max_sequences_per_row == 3 else max_sequences_per_row - 1]:
        rows[:, i], rows[:, j] = np.minimum(rows[:, i], rows[:, j]), np.maximum(rows[:, i], rows[:, j])
    rows = rows[np.argsort(rows[:, 0])]
    rows[rows == len(lengths)] = -1
    return rows


def _check_depth(max_sequences_per_row: int):
    if max_sequences_per_row not in (1, 2, 3):
        raise ValueError(f"max_sequences_per_row must be 1, 2 or 3, got {max_sequences_per_row}")


def lay_out_rows(tokens: dict, lengths, rows, what: str = "sequences", limit: str = "max_seq_length") -> dict:
    """Sequences' token rows -> packed rows: each row's sequences back to back from position 0, then padding.

    The one layout of packed rows, for pretraining instances (packed_records.pack_instances) and fine-tuning
    examples (finetune/packed_examples.packed_rows).

    Args:
        tokens: {name: [N, S] array}: each sequence alone, its `lengths[i]` real tokens first.
        lengths: [N] int: each sequence's real tokens.
        rows: [R, K] int: each row's sequences as indices into `lengths` (pack_lengths), then -1.
        what, limit: str. How the error names the sequences and S.

    Returns:
        {name: [R, S] (the tokens' dtypes, 0 at padding), "real": [R, S] bool, "position_ids": [R, S] int64
        (restarting at 0 per sequence), "packed_sequence_ids": [R, S] int64 (1..k, 0 at padding),
        "cls_positions": [R, K] int64 (where each sequence starts; 0 for an empty slot)}.

    Raises:
        ValueError: a row's sequences hold more than S tokens.

    Example:
        >>> out = lay_out_rows({"ids": np.array([[101, 7, 102], [101, 102, 0]])}, [3, 2], np.array([[0, -1], [1, -1]]))
        >>> out["ids"].tolist(), out["position_ids"].tolist()
        ([[101, 7, 102], [101, 102, 0]], [[0, 1, 2], [0, 1, 0]])
    """
    rows = np.asarray(rows, np.int64)
    s = next(iter(tokens.values())).shape[1]
    present = rows >= 0
    source = np.where(present, rows, 0)
    length = np.where(present, np.asarray(lengths)[source], 0)           # [R, K]
    ends = np.cumsum(length, axis=1)
    if (ends[:, -1] > s).any():
        raise ValueError(f"a row's {what} hold {ends[:, -1].max()} tokens, more than {limit} {s}")
    offset = ends - length                                                # [R, K] where each sequence starts
    k = rows.shape[1]
    column = np.arange(s)
    which = (ends[:, :, None] <= column).sum(1)                           # [R, S]: 0..k-1 real, k padding
    real = which < k
    slot = np.minimum(which, k - 1)
    within = column - np.take_along_axis(offset, slot, 1)
    at = np.where(real, np.take_along_axis(source, slot, 1) * s + within, 0)   # flat index into [N, S]
    out = {name: np.where(real, np.asarray(values).reshape(-1)[at], 0).astype(np.asarray(values).dtype)
           for name, values in tokens.items()}
    out["real"] = real
    out["position_ids"] = np.where(real, within, 0)
    out["packed_sequence_ids"] = np.where(real, which + 1, 0)
    out["cls_positions"] = np.where(present, offset, 0)
    return out
