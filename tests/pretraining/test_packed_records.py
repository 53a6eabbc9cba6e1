"""Packed pretraining records: each row holds whole instances of google-research's recipe, built as a per-row
loop over the instances says it should be; through serialized tf.train.Examples, a TFRecord file and tf.data's
parser, the rows unpack back into the same instances, field by field."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.pretraining.instances import (MaskingConfig, TokenizedDocuments, VocabIds, chunk_pairs,
                                              mask_instances, pack_pairs)
from bert_keras.pretraining.packed_records import (encode_packed_examples, pack_instances, packed_feature_spec,
                                                   packed_prediction_slots, parse_packed_examples, unpack_rows)
from bert_keras.pretraining.packing import pack_lengths
from bert_keras.pretraining.records import feature_spec, tfrecord_frames

SEQ, PRED = 64, 10
SLOTS = packed_prediction_slots(SEQ, PRED, 0.15)         # MaskingConfig's masked_lm_prob


@pytest.fixture(scope="module")
def instances():
    """~300 instances of google-research's recipe (instances.py) on a synthetic corpus: short sequences half of
    the time, so rows hold 1 to 3 of them."""
    rng = np.random.default_rng(0)
    vocab = VocabIds(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(200)])
    lengths = [rng.integers(1, 12, rng.integers(2, 9)).tolist() for _ in range(60)]
    tokens = rng.integers(5, vocab.size, sum(map(sum, lengths))).astype(np.int32)
    config = MaskingConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED, short_seq_prob=0.5, dupe_factor=2)
    pairs = chunk_pairs(TokenizedDocuments(tokens, lengths), config, [rng, rng])
    features = mask_instances(pack_pairs(np.append(tokens, np.int32(0)), pairs, vocab, config, rng), vocab,
                              config, rng)
    assert len(pairs) > 200
    return features


def expected_row(features: dict, row) -> dict:
    """The reference: one packed row from its instances, one Python list at a time."""
    out = {name: [] for name in ("input_ids", "segment_ids", "packed_sequence_ids", "position_ids",
                                 "masked_lm_positions", "masked_lm_ids", "next_sentence_labels", "cls_positions")}
    for k, i in enumerate(int(i) for i in row if i >= 0):
        n = int(features["input_mask"][i].sum())
        offset = len(out["input_ids"])
        out["cls_positions"].append(offset)
        out["input_ids"] += features["input_ids"][i][:n].tolist()
        out["segment_ids"] += features["segment_ids"][i][:n].tolist()
        out["packed_sequence_ids"] += [k + 1] * n
        out["position_ids"] += list(range(n))
        real = features["masked_lm_weights"][i] > 0
        out["masked_lm_positions"] += (features["masked_lm_positions"][i][real] + offset).tolist()
        out["masked_lm_ids"] += features["masked_lm_ids"][i][real].tolist()
        out["next_sentence_labels"].append(int(features["next_sentence_labels"][i][0]))
    sequences, predictions = len(out["cls_positions"]), len(out["masked_lm_ids"])
    out["input_mask"] = [1] * len(out["input_ids"])
    out["masked_lm_weights"] = [1.0] * predictions
    out["next_sentence_weights"] = [1.0] * sequences
    width = {"masked_lm_positions": SLOTS, "masked_lm_ids": SLOTS, "masked_lm_weights": SLOTS,
             "next_sentence_labels": 3, "cls_positions": 3, "next_sentence_weights": 3}
    return {name: values + [0] * (width.get(name, SEQ) - len(values)) for name, values in out.items()}


@pytest.fixture(scope="module")
def packed(instances):
    rows = pack_lengths(instances["input_mask"].sum(1), SEQ)
    assert (rows >= 0).sum(1).max() == 3 and (rows >= 0).sum(1).min() == 1
    return rows, pack_instances(instances, rows, SLOTS)


def test_rows_hold_whole_instances_back_to_back(instances, packed):
    rows, features = packed
    assert set(features) == set(packed_feature_spec(SEQ, SLOTS))
    for r, row in enumerate(rows):
        for name, values in expected_row(instances, row).items():
            np.testing.assert_array_equal(features[name][r], values, err_msg=f"row {r} {name}")


def test_tf_data_reads_the_rows_back_into_the_same_instances(instances, packed, tmp_path):
    rows, features = packed
    examples = encode_packed_examples(features)
    assert examples[0] == example_proto(features, 0)                     # protobuf's own bytes
    path = tmp_path / "packed.tfrecord"
    data, _ = tfrecord_frames(features)
    path.write_bytes(data.tobytes())
    parsed = [batch for batch in tf.data.TFRecordDataset(str(path)).batch(64).map(
        lambda s: parse_packed_examples(s, SEQ, SLOTS))]
    parsed = {name: np.concatenate([b[name].numpy() for b in parsed]) for name in parsed[0]}
    assert len(parsed["input_ids"]) == len(rows)
    for name, values in features.items():
        np.testing.assert_array_equal(parsed[name], values, err_msg=name)
    unpacked = unpack_rows(parsed, PRED)
    original = rows[rows >= 0]
    assert list(unpacked) == list(feature_spec(SEQ, PRED))             # google-research's features, its order
    for name, values in unpacked.items():
        np.testing.assert_array_equal(values, instances[name][original], err_msg=name)
    assert sorted(original.tolist()) == list(range(len(instances["input_ids"])))


def test_unpacked_instances_have_max_predictions_per_seq_slots_even_where_rows_have_fewer(instances, packed):
    """Rows carry packed_prediction_slots (78 at 512 with 80 predictions): an instance unpacked from them still has
    max_predictions_per_seq slots, its predictions first and zeros after, as google-research's records."""
    rows, features = packed
    wider = SLOTS + 5
    unpacked = unpack_rows(features, wider)
    original = rows[rows >= 0]
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        assert unpacked[name].shape == (len(original), wider)
        np.testing.assert_array_equal(unpacked[name][:, :PRED], instances[name][original], err_msg=name)
        assert not unpacked[name][:, PRED:].any()


def example_proto(features: dict, row: int) -> bytes:
    feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v[row])) if v.dtype == np.float32
               else tf.train.Feature(int64_list=tf.train.Int64List(value=v[row])) for k, v in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def test_rows_over_max_seq_length_are_an_error(instances):
    longest = np.argsort(instances["input_mask"].sum(1))[-3:]
    with pytest.raises(ValueError, match=f"more than max_seq_length {SEQ}"):
        pack_instances(instances, longest[None, :], SLOTS)
    with pytest.raises(ValueError, match=r"rows must be \[R, 1..3\]"):
        pack_instances(instances, np.zeros((2, 4), np.int64), SLOTS)


def test_record_frames_are_packed_window_by_window(instances):
    """pack_record_frames (pretraining-data --pack's shard writer): each run of `window` instances packed on its
    own, in order; unpacked, the rows are those instances as pack_lengths deals each window."""
    from bert_keras.pretraining.packed_records import pack_record_frames
    data, ends = tfrecord_frames({name: instances[name] for name in feature_spec(SEQ, PRED)})
    data, ends = data.tobytes(), ends.tolist()
    frames = [data[a:b] for a, b in zip([0] + ends[:-1], ends)]
    window = 50
    out = list(pack_record_frames(iter(frames), SEQ, PRED, 0.15, window=window))
    examples = [frame[12:-4] for frame in out]
    unpacked = unpack_rows({k: v.numpy() for k, v in parse_packed_examples(examples, SEQ, SLOTS).items()}, PRED)
    lengths = instances["input_mask"].sum(1)
    order = []
    for first in range(0, len(lengths), window):
        rows = pack_lengths(lengths[first:first + window], SEQ)
        order += (rows[rows >= 0] + first).tolist()
    assert sorted(order) == list(range(len(lengths)))
    for name, values in unpacked.items():
        np.testing.assert_array_equal(values, instances[name][order], err_msg=name)



@pytest.mark.parametrize("seq, pred, prob", [(64, 10, 0.15), (48, 20, 0.15), (40, 3, 0.2), (30, 8, 0.5)])
def test_prediction_slots_are_the_most_any_row_can_hold(seq, pred, prob):
    """packed_prediction_slots against every row of up to 3 sequences summing to <= seq tokens, counted by the two
    masking rules as their own code states them: instances.py's min(P, max(1, round(len * p))) (Python's round,
    as google-research's create_pretraining_data) and TF.Text's min(P, ceil(float32(len - 2) * float32(p)))."""
    import itertools
    import math
    static = [0] + [min(pred, max(1, round(n * prob))) for n in range(1, seq + 1)]
    dynamic = [0] + [min(pred, math.ceil(np.float32(max(n - 2, 0)) * np.float32(prob))) for n in range(1, seq + 1)]
    best = max(f[a] + f[b] + f[c] for f in (static, dynamic) for a, b in itertools.product(range(seq + 1), repeat=2)
               for c in [seq - a - b] if c >= 0)
    assert packed_prediction_slots(seq, pred, prob) == best <= 3 * pred


def test_prediction_slots_hold_whole_word_masking_of_tiny_sequences_and_no_more():
    """Adversarial real instances: documents of 1-3 token sentences, short_seq_prob 1, whole-word masking (words
    of 1-3 pieces), so rows hold 3 tiny sequences of >= 1 prediction each; every row fits SLOTS, the fullest
    row is what packed_prediction_slots allows at most, and a row of one prediction more is a clear error."""
    rng = np.random.default_rng(1)
    vocab = VocabIds(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(100)]
                     + [f"##p{i}" for i in range(100)])
    lengths = [rng.integers(1, 4, rng.integers(2, 7)).tolist() for _ in range(400)]
    tokens = rng.integers(5, vocab.size, sum(map(sum, lengths))).astype(np.int32)
    for seq, pred, whole in ((SEQ, PRED, True), (SEQ, PRED, False), (16, 2, True)):
        config = MaskingConfig(max_seq_length=seq, max_predictions_per_seq=pred, short_seq_prob=1.0, dupe_factor=1,
                               whole_word_mask=whole)
        pairs = chunk_pairs(TokenizedDocuments(tokens, lengths), config, [rng, rng])
        features = mask_instances(pack_pairs(np.append(tokens, np.int32(0)), pairs, vocab, config, rng), vocab,
                                  config, rng)
        rows = pack_lengths(features["input_mask"].sum(1), seq)
        slots = packed_prediction_slots(seq, pred, config.masked_lm_prob)
        packed = pack_instances(features, rows, slots)
        held = (packed["masked_lm_weights"] > 0).sum(1)
        assert packed["masked_lm_weights"].shape[1] == slots and held.max() <= slots
        assert held.sum() == (features["masked_lm_weights"] > 0).sum()           # no prediction dropped
    # The bound is reached: the fullest row each rule allows at 64 (lengths 1, 1, 62: 1 + 1 + round(9.3) = 11).
    worst = {name: np.zeros((3, SEQ if name in ("input_ids", "input_mask", "segment_ids") else
                             PRED if name.startswith("masked_lm") else 1), values.dtype)
             for name, values in features.items()}
    for i, n in enumerate((1, 1, SEQ - 2)):
        k = min(PRED, max(1, round(n * 0.15)))
        worst["input_mask"][i, :n] = 1
        worst["masked_lm_positions"][i, :k] = np.arange(k)
        worst["masked_lm_weights"][i, :k] = 1.0
    packed = pack_instances(worst, np.array([[0, 1, 2]]), SLOTS)
    assert (packed["masked_lm_weights"] > 0).sum() == SLOTS == 11
    worst["masked_lm_weights"][0, 1] = 1.0                                       # one more than the rule allows
    with pytest.raises(ValueError, match=f"12 MLM predictions, more than its {SLOTS} slots"):
        pack_instances(worst, np.array([[0, 1, 2]]), SLOTS)
