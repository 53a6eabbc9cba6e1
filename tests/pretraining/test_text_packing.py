"""`pretrain --text --pack`: the dynamically masked lines packed into rows on the fly (dataset.pack_masked_batch,
dynamic_masking_dataset(pack=True)) hold the same sequences as the unpacked pipeline, each exactly once, with
their MLM slots, in batches of static shape."""

from collections import Counter

import numpy as np
import pytest

from bert_keras.pretraining.packed_records import packed_prediction_slots

SEQ, PRED, WINDOW = 64, 10, 32
SLOTS = packed_prediction_slots(SEQ, PRED, 0.15)     # dynamic_masking_dataset's default masked_lm_prob


@pytest.fixture(scope="module")
def preprocessor(minilm_vocab):
    from bert_keras import BertPreprocessor
    return BertPreprocessor(minilm_vocab)


@pytest.fixture(scope="module")
def corpus():
    from conftest import FIXTURES
    return str(FIXTURES / "pretraining_corpus.txt")


def unmasked_sequences(x, y) -> list[tuple]:
    """Each sequence of a batch (padded rows, or packed rows split by packed_sequence_ids) with the labels put
    back at its masked positions: its original word pieces, as a tuple."""
    ids = np.array(x["input_word_ids"])
    positions, labels, weights = (np.asarray(v) for v in (x["masked_lm_positions"], y["masked_lm_ids"],
                                                          y["masked_lm_weights"]))
    for r in range(len(ids)):
        real = weights[r] > 0
        ids[r, positions[r, real]] = labels[r, real]
    if "packed_sequence_ids" not in x:
        mask = np.asarray(x["input_mask"]) > 0
        return [tuple(row[m]) for row, m in zip(ids, mask)]
    which = np.asarray(x["packed_sequence_ids"])
    return [tuple(row[w == k]) for row, w in zip(ids, which) for k in range(1, 4) if (w == k).any()]


def test_packed_rows_hold_each_masked_sequence_exactly_once(preprocessor, corpus):
    from bert_keras.pretraining.dataset import dynamic_masking_dataset, pack_masked_batch
    x, y = next(iter(dynamic_masking_dataset([corpus], preprocessor, WINDOW, SEQ, PRED, seed=3)))
    px, py = pack_masked_batch(x, y, SEQ, PRED)
    px, py = {k: v.numpy() for k, v in px.items()}, {k: v.numpy() for k, v in py.items()}
    rows = len(px["input_word_ids"])
    assert rows < WINDOW and px["input_word_ids"].shape == (rows, SEQ) and px["masked_lm_positions"].shape == (
        rows, SLOTS)
    assert Counter(unmasked_sequences(px, py)) == Counter(unmasked_sequences(x, y))
    assert len(set(unmasked_sequences(x, y))) == WINDOW                     # distinct lines: "exactly once" bites
    # the masked tokens and their labels moved with their sequence: as many real slots, the same labels
    assert sorted(py["masked_lm_ids"][py["masked_lm_weights"] > 0]) == sorted(
        np.asarray(y["masked_lm_ids"])[np.asarray(y["masked_lm_weights"]) > 0])
    # positions restart at each sequence's [CLS]; cls_positions point at them
    cls = preprocessor.vocab.index("[CLS]")
    for row, positions, which, starts in zip(px["input_word_ids"], px["position_ids"], px["packed_sequence_ids"],
                                             px["cls_positions"]):
        for k in range(1, which.max() + 1):
            at = np.flatnonzero(which == k)
            assert (positions[at] == np.arange(len(at))).all() and row[at[0]] == cls and starts[k - 1] == at[0]


def test_the_packed_pipeline_batches_rows_of_static_shape(preprocessor, corpus):
    from bert_keras.pretraining.dataset import dynamic_masking_dataset
    ds = dynamic_masking_dataset([corpus], preprocessor, 4, SEQ, PRED, seed=3, pack=True, pack_window=WINDOW)
    assert ds.element_spec[0]["input_word_ids"].shape.as_list() == [4, SEQ]
    assert ds.element_spec[1]["masked_lm_ids"].shape.as_list() == [4, SLOTS]
    batches = list(ds.take(3))
    sequences = [s for x, y in batches for s in unmasked_sequences({k: v.numpy() for k, v in x.items()},
                                                                   {k: v.numpy() for k, v in y.items()})]
    assert len(sequences) > 12 and len(set(sequences)) == len(sequences)     # > 1 a row; none twice
    assert all(x["packed_sequence_ids"].numpy().max(1).min() >= 1 for x, _ in batches)


def test_pack_with_records_is_refused_naming_pretraining_data(minilm_vocab, tmp_path):
    from bert_keras.pretraining import PretrainConfig, pretrain
    with pytest.raises(ValueError, match="pretraining-data --pack"):
        pretrain(PretrainConfig(model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / "run"),
                                records=str(tmp_path), pack=True, train_steps=2, save_every=1))
    assert not (tmp_path / "run").exists()


def test_a_resumed_packed_pipeline_holds_the_uninterrupted_rows(preprocessor, corpus):
    from bert_keras.pretraining.dataset import dynamic_masking_dataset

    def sequences(first_batch, take):
        ds = dynamic_masking_dataset([corpus], preprocessor, 4, SEQ, PRED, seed=5, first_batch=first_batch,
                                     pack=True, pack_window=WINDOW)
        return [unmasked_sequences({k: v.numpy() for k, v in x.items()}, {k: v.numpy() for k, v in y.items()})
                for x, y in ds.take(take)]

    assert sequences(3, 2) == sequences(0, 5)[3:]                    # batches 3 and 4, rows in the same order
