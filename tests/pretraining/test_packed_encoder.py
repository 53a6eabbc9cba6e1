"""The packed encoder is exact per sequence (issue 49, "Done when"): real pretraining instances (the data tool's
output on the shipped corpus cut into short documents) run through the real all-MiniLM-L6-v2 weights once as
google-research's padded rows and once packed up to 3 to a row (packing.pack_lengths, packed_records.py); every
sequence's vectors at its real tokens, its MLM logits, its own NSP logits and the batch loss agree. Letting
attention cross the sequences of a row (the mutation) breaks the agreement, so the comparison sees the mask.
20 SGD steps of bert_tiny (dropout off) on the same instances packed and unpacked reach the same weights.

The same on JAX: tests/on_jax/test_packed_parity.py; the helpers: packed_batches.py."""

import keras
import numpy as np
import pytest
from packed_batches import (SEQ, STEPS, assert_same_per_sequence, both_ways, crossing_attention, forward_rows,
                            per_sequence, per_sequence_tensors, sgd, tiny_pretrainer, train, training_batches)

from bert_keras import layers
from bert_keras.encoder import INPUT_NAMES, PACKED_INPUT_NAMES


@pytest.fixture(scope="module")
def instances_and_rows(minilm_vocab, tmp_path_factory):
    from packed_batches import make_instances

    from bert_keras.pretraining.packing import pack_lengths
    instances = make_instances(minilm_vocab, tmp_path_factory.mktemp("packed_encoder"))
    rows = pack_lengths(instances["input_mask"].sum(1), SEQ)
    return instances, rows


@pytest.fixture(scope="module")
def minilm_pretrainer(minilm_dir):
    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.tasks import BertPretrainer
    keras.utils.set_random_seed(0)                      # the heads: MiniLM has none, so seeded random ones
    return BertPretrainer(load_checkpoint(minilm_dir)[1])


def test_packed_rows_give_each_sequence_its_own_outputs(instances_and_rows, minilm_pretrainer, monkeypatch):
    """MiniLM on 22 real instances, padded one to a row and packed into 10 rows (TensorFlow's padding skip on: it
    drops the packed rows' padding as it does the padded rows'): the same vectors, logits and loss per sequence;
    with attention crossing the sequences of a row they differ."""
    instances, rows = instances_and_rows
    unpacked_batch, packed_batch = both_ways(instances, forward_rows(rows))
    assert len(unpacked_batch[0]["input_word_ids"]) == 22 and len(packed_batch[0]["input_word_ids"]) == 10
    unpacked = per_sequence(minilm_pretrainer, unpacked_batch)
    packed = per_sequence(minilm_pretrainer, packed_batch)
    assert_same_per_sequence(unpacked, packed)
    padding = packed_batch[0]["input_mask"] == 0
    ids = {k: v for k, v in packed_batch[0].items() if k in INPUT_NAMES + PACKED_INPUT_NAMES}
    assert padding.any() and not np.asarray(minilm_pretrainer.encoder(ids)["sequence_output"])[padding].any()
    monkeypatch.setattr(layers, "packed_attention_bias", crossing_attention)
    crossed = per_sequence(minilm_pretrainer, packed_batch)
    assert np.abs(crossed["sequence"] - unpacked["sequence"]).max() > 0.1
    with pytest.raises(AssertionError):
        assert_same_per_sequence(unpacked, crossed)


def test_packed_rows_under_xla_are_exact_too(instances_and_rows):
    """Under XLA (jit_compile) TensorFlow computes padding instead of skipping it, as JAX does: still the same per
    sequence (bert_tiny, random weights, to keep the compile short)."""
    import tensorflow as tf
    instances, rows = instances_and_rows
    unpacked_batch, packed_batch = both_ways(instances, forward_rows(rows)[:4])
    model = tiny_pretrainer()
    xla = per_sequence(model, packed_batch, tf.function(per_sequence_tensors, jit_compile=True))
    assert_same_per_sequence(per_sequence(model, unpacked_batch), xla)


def test_training_packed_reaches_the_unpacked_weights(instances_and_rows):
    """20 SGD steps of bert_tiny (dropout off) on 4 sequences a step, as 4 padded rows or 2 packed rows: the same
    losses and, after them, the same weights to float32 rounding."""
    instances, rows = instances_and_rows
    batches = training_batches(instances, rows, STEPS)
    runs = {}
    for way in (0, 1):
        model = sgd(tiny_pretrainer(), "tensorflow")
        start = [np.asarray(w) for w in model.get_weights()]
        runs[way] = train(model, [b[way] for b in batches])
    (unpacked_losses, unpacked), (packed_losses, packed) = runs[0], runs[1]
    np.testing.assert_allclose(packed_losses, unpacked_losses, rtol=1e-5)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(unpacked, start))
    apart = max(float(np.abs(a - b).max()) for a, b in zip(unpacked, packed))
    assert moved > 5e-3 and apart < 2e-6, (apart, moved)


def test_half_packed_inputs_and_pooled_only_are_refused():
    """position_ids without packed_sequence_ids (or the reverse) names the missing one; pooled_only, which computes
    one [CLS] a row, refuses packed rows (pool_at reads each sequence's)."""
    from bert_keras import BertConfig, BertEncoder
    encoder = BertEncoder(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16))
    ids = {"input_word_ids": np.full((1, 6), 7, "int32"), "input_mask": np.ones((1, 6), "int32"),
           "input_type_ids": np.zeros((1, 6), "int32")}
    packing = {"position_ids": np.array([[0, 1, 2, 0, 1, 2]], "int32"),
               "packed_sequence_ids": np.array([[1, 1, 1, 2, 2, 2]], "int32")}
    for missing in PACKED_INPUT_NAMES:
        with pytest.raises(ValueError, match=f"'{missing}' is missing"):
            encoder({**ids, **{k: v for k, v in packing.items() if k != missing}})
    with pytest.raises(ValueError, match="pool_at"):
        encoder({**ids, **packing}, pooled_only=True)
    out = encoder({**ids, **packing})
    pooled = np.asarray(encoder.pool_at(out["sequence_output"], np.array([[0, 3]])))
    np.testing.assert_allclose(pooled[0, 0], pooled[0, 1], atol=1e-6)      # two identical sequences
    np.testing.assert_allclose(pooled[0, 0], np.asarray(encoder({k: v[:, :3] for k, v in ids.items()})[
        "pooled_output"])[0], atol=1e-6)
