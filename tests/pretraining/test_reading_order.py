"""The pretraining reading order: segments read back exactly what TensorFlow's own readers read; a pipeline started
at batch n yields the uninterrupted stream's batches from n on, and gets there without reading the batches before
it; each epoch holds every record once; pipelines' parts are disjoint and together the whole set."""

import collections
import contextlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.pretraining import reading_order
from conftest import FIXTURES, pretraining_records

SEQ, PRED = 64, 10
SEGMENT = 7                  # records per segment: many segments, ragged ends, from a small corpus
_RECORDING = []              # the Counters of opened_files() now recording
_HOOKED = []


def _audit(event, args):
    if event == "open" and _RECORDING and isinstance(args[0], str):
        for counter in list(_RECORDING):
            counter[args[0]] += 1


@contextlib.contextmanager
def opened_files():
    """Counts the files Python opens inside the block, by path, from the interpreter's own "open" audit event
    (sys.addaudithook, PEP 578: every open() raises it, in every thread)."""
    if not _HOOKED:                              # hooks cannot be removed: one for the session, idle outside
        sys.addaudithook(_audit)
        _HOOKED.append(_audit)
    counter = collections.Counter()
    _RECORDING.append(counter)
    try:
        yield counter
    finally:
        _RECORDING.remove(counter)


@pytest.fixture(scope="module")
def records(minilm_vocab, tmp_path_factory):
    return pretraining_records(minilm_vocab, tmp_path_factory.mktemp("records"), 3, 2)


def test_segments_read_what_tfrecord_dataset_reads(records):
    segments = reading_order.index_files(records, "tfrecord", segment_records=SEGMENT)
    ours = [r for s in range(len(segments.count)) for r in segments.read(s)]
    assert ours == [r.numpy() for r in tf.data.TFRecordDataset(records)]
    assert len(segments.count) > 20 and set(segments.count[:-1]) >= {7} and 0 < segments.count.min()


def test_a_group_of_segments_opens_each_file_once(records):
    segments = reading_order.index_files(records, "tfrecord", segment_records=SEGMENT)
    ids = [int(s) for s in np.random.default_rng(0).permutation(len(segments.count))[:15]]  # mixed files, shuffled
    everything = [r.numpy() for r in tf.data.TFRecordDataset(records)]            # the reference reader's records
    first = np.concatenate([[0], np.cumsum(segments.count)])
    want = [everything[first[s]:first[s + 1]] for s in ids]
    with opened_files() as opened:
        assert segments.read_many(ids) == want
    assert set(opened) <= set(records) and set(opened.values()) == {1} and len(opened) == len({segments.file_id[s] for s in ids}) > 1


def test_text_segments_read_what_text_line_dataset_keeps(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_bytes(b"\n\n".join(l for l in (FIXTURES / "pretraining_corpus.txt").read_bytes().split(b"\n")[:90])
                     + b"\n  \n\tlast line without newline")
    segments = reading_order.index_files([str(text)], "text", segment_records=SEGMENT)
    ours = [r.strip() for s in range(len(segments.count)) for r in segments.read(s)]
    reference = tf.data.TextLineDataset(str(text)).map(tf.strings.strip).filter(lambda l: tf.strings.length(l) > 0)
    assert ours == [l.numpy() for l in reference] and len(ours) > 40


def _batches(files, first_batch=0, count=10, shard=(0, 1), seed=3, segment_records=SEGMENT):
    from bert_keras.pretraining.dataset import records_dataset
    ds = records_dataset(files, 8, SEQ, PRED, seed=seed, first_batch=first_batch, shuffle_buffer=20, shard=shard,
                         segment_records=segment_records)
    return [np.concatenate([x["input_word_ids"], x["masked_lm_positions"]], axis=1) for x, _ in ds.take(count)]


@pytest.mark.parametrize("shard", [(0, 1), (1, 3)])
def test_starting_at_batch_n_is_the_uninterrupted_stream_from_n(records, shard, segment_records=SEGMENT):
    total = sum(1 for _ in tf.data.TFRecordDataset(records))
    whole = _batches(records, count=3 * total // 8 + 5, shard=shard, segment_records=segment_records)  # 3+ epochs
    for n in (1, 17, total // 8, len(whole) - 5):                  # inside, across group and epoch boundaries
        np.testing.assert_array_equal(np.stack(_batches(records, n, 5, shard, segment_records=segment_records)),
                                      np.stack(whole[n:n + 5]))


def test_resume_reads_only_the_group_it_starts_in(records):
    """Batch 10,000 (dozens of epochs in): the files are opened a handful of times before it arrives (the index,
    then a group of 3 segments opens at most its 3 files), not once per group of 10,000 batches (thousands)."""
    from bert_keras.pretraining.dataset import records_dataset
    with opened_files() as opened:
        ds = records_dataset(records, 8, SEQ, PRED, seed=3, first_batch=10_000, shuffle_buffer=20,
                             segment_records=SEGMENT)
        next(iter(ds))
    segments = reading_order.index_files(records, "tfrecord", segment_records=SEGMENT)
    assert 10_000 * 8 > 50 * segments.count.sum()                  # the resume point is 50+ epochs in
    opens = sum(n for path, n in opened.items() if path in records)
    assert len(records) < opens <= len(records) + 12 * 3             # the index, a few groups (prefetch included)


def test_each_epoch_holds_every_record_once_and_epochs_differ(records):
    segments = reading_order.index_files(records, "tfrecord", segment_records=SEGMENT)
    total = int(segments.count.sum())
    stream = reading_order.record_stream(segments, seed=5, shard=0, shards=1, window=3, training=True)
    epochs = [list(e) for e in np.array(list(stream.take(3 * total).as_numpy_iterator()), object).reshape(3, total)]
    everything = sorted(r.numpy() for r in tf.data.TFRecordDataset(records))
    assert all(sorted(e) == everything for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2] and epochs[0] != sorted(epochs[0])


@pytest.mark.parametrize("shards", [2, 3])
def test_pipelines_split_each_epoch(records, shards, segment_records=SEGMENT):
    segments = reading_order.index_files(records, "tfrecord", segment_records=segment_records)
    parts = [list(reading_order.record_stream(segments, 5, i, shards, 3, training=False).as_numpy_iterator())
             for i in range(shards)]
    everything = collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(records))
    assert sum((collections.Counter(p) for p in parts), collections.Counter()) == everything
    assert all(len(p) > 0 for p in parts)


def test_index_is_cached_and_a_changed_file_is_reindexed_or_named(records, tmp_path):
    cache = tmp_path / "index.npz"
    first = reading_order.index_files(records, "tfrecord", str(cache), SEGMENT)
    assert cache.exists()
    np.testing.assert_array_equal(reading_order.index_files(records, "tfrecord", str(cache), SEGMENT).start,
                                  first.start)
    other = reading_order.index_files(records, "tfrecord", str(cache), 2 * SEGMENT)   # another size: reindexed
    assert len(other.count) < len(first.count) and set(other.count[:-1]) >= {2 * SEGMENT}
    copy = tmp_path / "copy.tfrecord"
    copy.write_bytes(open(records[0], "rb").read())
    segments = reading_order.index_files([str(copy)], "tfrecord", segment_records=SEGMENT)
    data = copy.read_bytes()
    copy.write_bytes(data[len(data) // 2:] + data[:len(data) // 2])        # same size, other bytes
    with pytest.raises(ValueError, match="copy.tfrecord changed since it was indexed"):
        segments.read(len(segments.count) - 1)
    copy.write_bytes(data[:-10])
    with pytest.raises(ValueError, match="copy.tfrecord: truncated TFRecord file"):
        reading_order.index_files([str(copy)], "tfrecord", segment_records=SEGMENT)


def test_more_pipelines_than_segments_split_by_record(records):
    big = 10_000                                                   # one segment per file, three files
    test_pipelines_split_each_epoch(records, 5, segment_records=big)
    test_starting_at_batch_n_is_the_uninterrupted_stream_from_n(records, (3, 5), segment_records=big)
