"""The NumPy tf.train.Example encoder against protobuf's own serializer, byte for byte."""

import numpy as np
import tensorflow as tf

from bert_keras.pretraining.example_proto import encode_examples, varint_sizes


def protobuf_bytes(features: dict, row: int) -> bytes:
    feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v[row])) if v.dtype == np.float32
               else tf.train.Feature(int64_list=tf.train.Int64List(value=v[row])) for k, v in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def test_bytes_equal_protobufs_deterministic_serialization():
    rng = np.random.default_rng(0)
    n = 200
    shift = rng.integers(0, 63, (n, 6))
    features = {
        "input_ids": rng.integers(0, 30522, (n, 64)),                          # 1-3 byte varints
        "input_mask": rng.integers(0, 2, (n, 64)).astype(np.int32),             # any integer dtype
        "masked_lm_weights": rng.standard_normal((n, 7)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (n, 1)),
        "wide": rng.integers(0, 2 ** 62, (n, 6)) >> shift,                      # every varint width up to 9
        "negative": rng.integers(-2 ** 63, 0, (n, 2), dtype=np.int64),          # 10-byte varints
        "no_ints": np.zeros((n, 0), np.int64),
        "zero_floats": np.zeros((n, 0), np.float32),                            # (no key is a prefix of another:
        "zz_big_list": rng.integers(0, 200, (n, 300)),                          #  upb orders those its own way)
    }
    data, ends = encode_examples(features)
    data, starts = data.tobytes(), np.concatenate([[0], ends[:-1]])
    for row in range(n):
        assert data[starts[row]:ends[row]] == protobuf_bytes(features, row)


def test_varint_sizes_match_protobuf():
    values = np.array([0, 1, 127, 128, 2 ** 14 - 1, 2 ** 14, 2 ** 21, 2 ** 35, 2 ** 63 - 1, -1, -2 ** 63])
    expected = [len(tf.train.Int64List(value=[v]).SerializeToString()) - 2 for v in values]
    assert varint_sizes(values).tolist() == expected
