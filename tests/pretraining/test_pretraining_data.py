"""`bert-keras pretraining-data` against google-research's format and recipe.

The records are parsed with run_pretraining.py's `name_to_features` (transcribed here, not imported from our
code); every instance is unmasked with its own labels and its segments are found in the corpus as tokenized by
HF tokenizers (the independent reference); masking and NSP rates are checked against the recipe's numbers."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from bert_keras_cli.main import main
from conftest import FIXTURES

CORPUS = str(FIXTURES / "pretraining_corpus.txt")
SEQ, PRED = 64, 10

# google-research/bert run_pretraining.py, input_fn_builder's name_to_features.
GOOGLE_FEATURES = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


def make(tmp_path, name, vocab, *extra, seed="7"):
    out = tmp_path / name
    assert main(["pretraining-data", CORPUS, "--out", str(out), "--vocab", vocab, "--shards", "2",
                 "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED), "--dupe-factor", "3",
                 "--seed", seed, *extra]) == 0
    return sorted(tmp_path.glob(f"{name}-*.tfrecord"))


@pytest.fixture(scope="module")
def data(minilm_vocab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("records")
    files = make(tmp, "plain", minilm_vocab)
    rows = [tf.io.parse_single_example(r, GOOGLE_FEATURES) for r in tf.data.TFRecordDataset([str(f) for f in files])]
    return tmp, files, [{k: v.numpy() for k, v in r.items()} for r in rows]


@pytest.fixture(scope="module")
def reference(minilm_vocab):
    """Each document's token ids, concatenated, as HF tokenizers gives them; and the vocabulary."""
    from tokenizers import BertWordPieceTokenizer
    tokenizer = BertWordPieceTokenizer(minilm_vocab, lowercase=True)
    documents = open(CORPUS, encoding="utf-8").read().split("\n\n")
    streams = []
    for d in documents:
        stream = []
        for line in d.strip().split("\n"):
            stream.extend(tokenizer.encode(line, add_special_tokens=False).ids)
        streams.append(stream)
    vocab = open(minilm_vocab, encoding="utf-8").read().splitlines()
    return streams, vocab


def contains(stream, part):
    n = len(part)
    return any(stream[i:i + n] == part for i in range(len(stream) - n + 1))


def test_records_parse_with_google_research_features_and_are_well_formed(data, reference):
    _, files, rows = data
    streams, vocab = reference
    cls, sep, mask = (vocab.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    assert [f.name for f in files] == ["plain-00000-of-00002.tfrecord", "plain-00001-of-00002.tfrecord"]
    assert len(rows) > 100
    for r in rows:
        n = int(r["input_mask"].sum())
        assert (r["input_mask"][:n] == 1).all() and (r["input_ids"][n:] == 0).all()
        ids = r["input_ids"][:n].copy()
        k = int(r["masked_lm_weights"].sum())
        positions, labels = r["masked_lm_positions"][:k], r["masked_lm_ids"][:k]
        assert (r["masked_lm_weights"][:k] == 1).all() and (r["masked_lm_positions"][k:] == 0).all()
        assert list(positions) == sorted(set(positions)) and k == min(PRED, max(1, round(n * 0.15)))
        ids[positions] = labels                                      # undo the masking with its own labels
        seps = np.flatnonzero(ids == sep)
        assert ids[0] == cls and len(seps) >= 2 and seps[-1] == n - 1
        first_sep = seps[0]
        assert (r["segment_ids"][:first_sep + 1] == 0).all() and (r["segment_ids"][first_sep + 1:n] == 1).all()
        assert cls not in labels and sep not in labels and not set(positions) & {0, *seps}
        a, b = list(ids[1:first_sep]), list(ids[first_sep + 1:n - 1])
        assert a and b
        # Truncation drops tokens at either end only, so A and B are each a run of some document's tokens;
        # an actual next B continues A in the same document (when neither was cut in between).
        assert any(contains(s, a) for s in streams) and any(contains(s, b) for s in streams)
        if r["next_sentence_labels"][0] == 0 and n < SEQ:
            assert any(contains(s, a + b) for s in streams)


def test_masking_and_nsp_rates_follow_the_recipe(data, reference):
    _, _, rows = data
    _, vocab = reference
    mask = vocab.index("[MASK]")
    kinds = collections.Counter()
    for r in rows:
        k = int(r["masked_lm_weights"].sum())
        for p, label in zip(r["masked_lm_positions"][:k], r["masked_lm_ids"][:k]):
            token = r["input_ids"][p]
            kinds["mask" if token == mask else "same" if token == label else "random"] += 1
    total = sum(kinds.values())
    assert total > 1000
    assert abs(kinds["mask"] / total - 0.8) < 0.04
    assert abs(kinds["same"] / total - 0.1) < 0.03 and abs(kinds["random"] / total - 0.1) < 0.03
    random_next = np.mean([r["next_sentence_labels"][0] for r in rows])
    assert 0.45 < random_next < 0.7          # 50% of multi-sentence chunks, plus every one-sentence chunk


def test_same_seed_same_bytes_other_seed_other_bytes(data, tmp_path, minilm_vocab):
    _, files, _ = data
    again = make(tmp_path, "plain", minilm_vocab)
    assert [f.read_bytes() for f in again] == [f.read_bytes() for f in files]
    other = make(tmp_path, "other", minilm_vocab, seed="8")
    assert [f.read_bytes() for f in other] != [f.read_bytes() for f in files]


def test_whole_word_masking_masks_every_piece_of_a_word(reference, tmp_path, minilm_vocab):
    _, vocab = reference
    files = make(tmp_path, "wwm", minilm_vocab, "--whole-word-mask")
    continuation = np.array([t.startswith("##") for t in vocab])
    special = {vocab.index("[CLS]"), vocab.index("[SEP]")}
    whole_words = 0
    for record in tf.data.TFRecordDataset([str(f) for f in files]):
        r = {k: v.numpy() for k, v in tf.io.parse_single_example(record, GOOGLE_FEATURES).items()}
        k = int(r["masked_lm_weights"].sum())
        ids = r["input_ids"].copy()
        ids[r["masked_lm_positions"][:k]] = r["masked_lm_ids"][:k]
        masked = set(r["masked_lm_positions"][:k].tolist())
        n = int(r["input_mask"].sum())
        for p in masked:
            # the word's next piece is masked too, and so is the piece before a masked continuation
            if p + 1 < n and continuation[ids[p + 1]]:
                assert p + 1 in masked
                whole_words += 1
            if continuation[ids[p]] and ids[p - 1] not in special:    # a word cut by truncation starts anew
                assert p - 1 in masked
    assert whole_words > 20


def test_truncated_record_file_is_named(data, tmp_path):
    from bert_keras.pretraining import check_records
    _, files, _ = data
    broken = tmp_path / "broken.tfrecord"
    broken.write_bytes(files[0].read_bytes()[:-7])
    with pytest.raises(ValueError, match="broken.tfrecord"):
        check_records([str(broken)], SEQ, PRED)
    with pytest.raises(ValueError, match="max_seq_length 128"):
        check_records([str(files[0])], 128, PRED)


def test_bad_input_exits_2_with_the_reason(tmp_path, capsys, minilm_vocab):
    one = tmp_path / "one.txt"
    one.write_text("A single document .\nWith two sentences .\n")
    assert main(["pretraining-data", str(one), "--out", str(tmp_path / "o"), "--vocab", minilm_vocab]) == 2
    assert "at least two" in capsys.readouterr().err
    assert main(["pretraining-data", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o"),
                 "--vocab", minilm_vocab]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert not list(tmp_path.glob("o-*"))


def test_dynamic_masking_masks_real_tokens_afresh(minilm_vocab, reference):
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining.dataset import dynamic_masking_dataset
    streams, vocab = reference
    cls, sep, mask = (vocab.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    tf.random.set_seed(0)
    ds = dynamic_masking_dataset([CORPUS], BertPreprocessor(minilm_vocab), batch_size=32, max_seq_length=SEQ,
                                 max_predictions_per_seq=PRED)
    kinds, real, masked, seen = collections.Counter(), 0, 0, {}
    for x, y in ds.take(20):
        ids, positions = x["input_word_ids"].numpy(), x["masked_lm_positions"].numpy()
        labels, w = y["masked_lm_ids"].numpy(), y["masked_lm_weights"].numpy()
        assert ids.shape == (32, SEQ) and positions.shape == labels.shape == (32, PRED)
        for row in range(32):
            k = int(w[row].sum())
            n = int(x["input_mask"].numpy()[row].sum())
            original = ids[row, :n].copy()
            original[positions[row, :k]] = labels[row, :k]
            assert original[0] == cls and original[n - 1] == sep and (w[row, k:] == 0).all()
            assert not set(positions[row, :k]) & {0, n - 1}
            # the unmasked line is a run of the corpus as HF tokenizers tokenizes it
            assert any(contains(s, list(original[1:n - 1])) for s in streams)
            for p, label in zip(positions[row, :k], labels[row, :k]):
                token = ids[row, p]
                kinds["mask" if token == mask else "same" if token == label else "random"] += 1
            real, masked = real + n - 2, masked + k
            key = tuple(original)
            seen.setdefault(key, set()).add(tuple(positions[row, :k]))
    assert abs(masked / real - 0.15) < 0.03
    assert abs(kinds["mask"] / masked - 0.8) < 0.05
    # lines that came round twice (20 batches of 32 from 260 lines) were masked differently
    assert any(len(v) > 1 for v in seen.values())


def test_vectorized_serialization_equals_protobufs_own(data):
    """Records are encoded in NumPy; protobuf's tf.train.Example, given the values parsed back, must write the
    same bytes (its deterministic serializer: map keys sorted)."""
    _, files, rows = data
    for record in list(tf.data.TFRecordDataset([str(f) for f in files]).take(20)):
        values = {k: v.numpy() for k, v in tf.io.parse_single_example(record, GOOGLE_FEATURES).items()}
        features = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v)) if v.dtype == np.float32
                    else tf.train.Feature(int64_list=tf.train.Int64List(value=v)) for k, v in values.items()}
        reference = tf.train.Example(features=tf.train.Features(feature=features))
        assert record.numpy() == reference.SerializeToString(deterministic=True)


def test_truncation_cuts_what_google_researchs_loop_cuts():
    """truncate_pairs' closed form against truncate_seq_pair's loop (drop from the longer, B on a tie)."""
    from bert_keras.pretraining.instances import truncate_pairs
    rng = np.random.default_rng(0)
    a, b = rng.integers(1, 200, 5000), rng.integers(1, 200, 5000)
    front_a, len_a, front_b, len_b = truncate_pairs(a, b, 125, rng)
    for i in range(len(a)):
        la, lb = int(a[i]), int(b[i])
        while la + lb > 125:
            if la > lb:
                la -= 1
            else:
                lb -= 1
        assert (len_a[i], len_b[i]) == (la, lb)
        assert 0 <= front_a[i] <= a[i] - la and 0 <= front_b[i] <= b[i] - lb
    cut = (a - len_a) + (b - len_b)
    assert abs((front_a + front_b).sum() / cut.sum() - 0.5) < 0.01      # fair coin for front vs back


def test_whole_word_masking_fills_the_budget_past_the_partial_sort():
    """google's loop takes words in random order while they fit. With eight 2-piece words, two 1-piece words
    and a budget of 3: one 2-piece word and one 1-piece word (3 tokens), except when the two 1-piece words come
    first (then no 2-piece word fits: 2 tokens, 1 row in 45). Also when both 1-piece words come late in the
    order, beyond the 2 * max_predictions ranks the partial sort covers (~13% of rows)."""
    from bert_keras.pretraining.instances import MaskingConfig, VocabIds, mask_instances
    vocab = VocabIds(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"])
    row = [1] + [4, 5] * 8 + [4, 4] + [2]                          # [CLS] (a ##b) x 8, a, a [SEP]: 20 tokens
    n = 900
    features = {"input_ids": np.array([row] * n), "input_mask": np.ones((n, 20), np.int64),
                "segment_ids": np.zeros((n, 20), np.int64), "next_sentence_labels": np.zeros((n, 1), np.int64)}
    config = MaskingConfig(max_seq_length=20, max_predictions_per_seq=3, whole_word_mask=True)
    out = mask_instances(features, vocab, config, np.random.default_rng(0))
    two = 0
    for positions, weights in zip(out["masked_lm_positions"], out["masked_lm_weights"]):
        chosen = positions[weights > 0].tolist()
        if chosen == [17, 18]:
            two += 1
            continue
        pieces = sorted(row[i] for i in chosen)
        assert pieces == [4, 4, 5], chosen                         # one whole 2-piece word, one 1-piece word
        second = chosen[[row[i] for i in chosen].index(5)]
        assert second - 1 in chosen                                # its first piece is masked with it
    assert 5 <= two <= 40                                          # 900 / 45 = 20 expected


def test_masking_picks_a_uniform_subset_of_the_candidates():
    """Without whole words, google's loop masks the first num_to_predict candidates of a random order: every
    candidate (not [CLS]/[SEP]/padding) equally likely, exactly num_to_predict of them."""
    from bert_keras.pretraining.instances import MaskingConfig, VocabIds, mask_instances
    vocab = VocabIds(["[PAD]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(20)])
    n, s = 6000, 24
    row = [1] + list(range(4, 14)) + [2] + list(range(14, 24)) + [2]       # 21 candidates, 23 tokens
    features = {"input_ids": np.array([row + [0]] * n), "input_mask": np.array([[1] * 23 + [0]] * n),
                "segment_ids": np.zeros((n, s), np.int64), "next_sentence_labels": np.zeros((n, 1), np.int64)}
    config = MaskingConfig(max_seq_length=s, max_predictions_per_seq=5, masked_lm_prob=0.15)
    out = mask_instances(features, vocab, config, np.random.default_rng(0))
    k = round(23 * 0.15)                                                   # 3
    assert (out["masked_lm_weights"].sum(1) == k).all()
    counts = collections.Counter(out["masked_lm_positions"][:, :k].reshape(-1).tolist())
    assert set(counts) == set(range(1, 11)) | set(range(12, 22))
    expected = n * k / 21                                                  # ~857 each, sd ~28
    assert all(abs(c - expected) < 5 * expected ** 0.5 for c in counts.values()), counts


@pytest.mark.parametrize("batch_size", [1, 7, 16384])
def test_tokenized_documents_are_hf_tokenizers_ids_however_the_lines_are_batched(minilm_vocab, batch_size):
    from tokenizers import BertWordPieceTokenizer

    from bert_keras import BertPreprocessor
    from bert_keras.pretraining.instances import tokenize_documents
    documents = [d.strip().split("\n") for d in open(CORPUS, encoding="utf-8").read().split("\n\n") if d.strip()]
    documents.insert(1, ["", "(an empty sentence and an empty document are dropped)", " "])
    documents.insert(3, [""])
    hf = BertWordPieceTokenizer(minilm_vocab, lowercase=True)
    expected = [[ids for ids in (hf.encode(s, add_special_tokens=False).ids for s in d) if ids] for d in documents]
    expected = [d for d in expected if d]                      # empty sentences and documents are dropped
    got = tokenize_documents(documents, BertPreprocessor(minilm_vocab), batch_size=batch_size)
    assert len(expected) == len(documents) - 1
    assert got.lengths == [[len(ids) for ids in d] for d in expected]
    assert got.tokens.tolist() == [t for d in expected for ids in d for t in ids]


def test_shards_are_what_tf_io_tfrecordwriter_writes_for_their_records(data, tmp_path):
    """Our framing (lengths and masked CRC-32Cs computed in NumPy and google-crc32c) against TensorFlow's writer,
    byte for byte, for every shard."""
    _, files, _ = data
    for i, path in enumerate(files):
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
        assert records
        reference = str(tmp_path / f"reference{i}.tfrecord")
        with tf.io.TFRecordWriter(reference) as writer:
            for record in records:
                writer.write(record)
        assert path.read_bytes() == open(reference, "rb").read()


def google_chunk_walk(lengths, config, rngs, block_sentences):
    """google-research's create_instances_from_document loop up to truncation, transcribed sentence by sentence
    (current_chunk, current_length, unused sentences put back), on sentence lengths; fed the uniforms
    chunk_pairs draws (pass p from rngs[p]; per block of documents: the targets [2, docs], a chunk's a_end and
    coin at its first sentence [2, sentences], then the random-next draws [11, chunks] in chunk order)."""
    count = [len(d) for d in lengths]
    first = np.cumsum([0] + count[:-1]).tolist()
    sizes = [n for d in lengths for n in d]
    starts = np.cumsum([0] + sizes[:-1]).tolist()
    blocks = np.searchsorted(first, np.arange(0, len(sizes), block_sentences)).tolist() + [len(count)]
    max_tokens = config.max_seq_length - 3
    pairs = []
    for rng in rngs:
        for lo, hi in zip(blocks[:-1], blocks[1:]):
            if lo == hi:
                continue
            short, size = rng.random((2, hi - lo))
            base = first[lo]
            u = rng.random((2, first[hi - 1] + count[hi - 1] - base))
            chunks = []
            for d in range(lo, hi):
                target = 2 + int(size[d - lo] * (max_tokens - 1)) if short[d - lo] < config.short_seq_prob \
                    else max_tokens
                chunk, length, i = [], 0, 0
                while i < count[d]:
                    chunk.append(first[d] + i)
                    length += sizes[first[d] + i]
                    if i == count[d] - 1 or length >= target:
                        draw = u[:, chunk[0] - base]
                        a_end = 1 + int(draw[0] * (len(chunk) - 1)) if len(chunk) >= 2 else 1
                        random_next = len(chunk) == 1 or draw[1] < 0.5
                        chunks.append((d, chunk, a_end, random_next, target))
                        if random_next:
                            i -= len(chunk) - a_end
                        chunk, length = [], 0
                    i += 1
            v = rng.random((11, len(chunks)))
            for k, (d, chunk, a_end, random_next, target) in enumerate(chunks):
                a = chunk[:a_end]
                a_length = sum(sizes[x] for x in a)
                if random_next:
                    for t in range(10):
                        other = int(v[t, k] * len(count))
                        if other != d:
                            break
                    b = []
                    for x in range(first[other] + int(v[10, k] * count[other]), first[other] + count[other]):
                        b.append(x)
                        if sum(sizes[y] for y in b) >= target - a_length:
                            break
                else:
                    b = chunk[a_end:]
                pairs.append((starts[a[0]], a_length, starts[b[0]], sum(sizes[y] for y in b), int(random_next)))
    return np.array(pairs, np.int64).reshape(-1, 5)


@pytest.mark.parametrize("block_sentences", [1 << 20, 37])
def test_pairs_follow_google_researchs_chunk_loop(block_sentences):
    """A bucket's pairs (every sentence's chunk at once, documents' chunks found by pointer doubling) are exactly
    the pairs of google-research's sequential loop fed the same uniforms, pass p of bucket b drawing from
    default_rng([seed, b, p]); also when documents go in blocks."""
    from bert_keras.pretraining import instances
    from bert_keras.pretraining.keyed import keyed_pairs
    rng = np.random.default_rng(5)
    lengths = [rng.integers(1, 40, rng.integers(1, 30)).tolist() for _ in range(60)] + [[90], [3, 200, 4]]
    documents = instances.TokenizedDocuments(np.zeros(sum(map(sum, lengths)), np.int32), lengths)
    config = instances.MaskingConfig(max_seq_length=48, short_seq_prob=0.3, dupe_factor=3)
    pairs = keyed_pairs(documents, config, seed=11, bucket=4, block_sentences=block_sentences)
    assert len(pairs) > 300 and 0.3 < pairs[:, 4].mean() < 0.8
    rngs = [np.random.default_rng([11, 4, p]) for p in range(3)]
    np.testing.assert_array_equal(pairs, google_chunk_walk(lengths, config, rngs, block_sentences))
