"""The keyed generator draws google-research's distributions: on WikiText-2 valid, over many seeds, its instance
count, lengths, random-next share, masked count and 80/10/10 split (and, with whole-word masking, the share of
"##" pieces masked) match the Model Garden's create_pretraining_data.py (google-research's script ported to TF2,
the independent reference: its tokenizer and its create_instances_from_document) within google's own seed
spread. Ours runs in several buckets (random next sentences from the same bucket, as the sharded peers do)."""

import os
import random

import numpy as np
import pytest
import tensorflow as tf

from conftest import shared_data_dir

pytestmark = pytest.mark.slow
SEQ, PRED = 128, 20


def wikitext_valid():
    shared = shared_data_dir()
    path = shared / "wikitext-2" / "valid.txt" if shared else None
    if not path or not path.exists():
        pytest.skip("needs ../shared/data/wikitext-2/valid.txt")
    import sys
    from conftest import REPO
    sys.path.insert(0, str(REPO / "tools"))
    from wikitext_to_sentences import articles
    return list(articles(str(path)))


def statistics(lengths, random_next, masked, kinds, pieces) -> dict:
    """Per run: instances, mean tokens, random-next share, mean masked, [MASK]/same/random shares, share of
    masked tokens that are "##" pieces."""
    total = sum(kinds.values())
    return {"instances": len(lengths), "tokens": np.mean(lengths), "random_next": np.mean(random_next),
            "masked": np.mean(masked), "mask": kinds["mask"] / total, "same": kinds["same"] / total,
            "random": kinds["random"] / total, "pieces": pieces / total}


def google_runs(documents, vocab_file, seeds, whole_word):
    from official.nlp.data import create_pretraining_data as google
    from official.nlp.tools import tokenization
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    tokenized = [[t for t in (tokenizer.tokenize(s) for s in d) if t] for d in documents]
    tokenized = [d for d in tokenized if d]
    vocab_words = list(tokenizer.vocab.keys())
    runs = []
    for seed in seeds:                     # create_training_instances' loop on the tokenized documents
        rng = random.Random(seed)
        docs = list(tokenized)
        rng.shuffle(docs)
        instances = []
        for index in range(len(docs)):
            instances.extend(google.create_instances_from_document(docs, index, SEQ, 0.1, 0.15, PRED, vocab_words,
                                                                   rng, whole_word, None))
        kinds, pieces = {"mask": 0, "same": 0, "random": 0}, 0
        for inst in instances:
            for p, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
                token = inst.tokens[p]
                kinds["mask" if token == "[MASK]" else "same" if token == label else "random"] += 1
                pieces += label.startswith("##")
        runs.append(statistics([len(i.tokens) for i in instances], [i.is_random_next for i in instances],
                               [len(i.masked_lm_positions) for i in instances], kinds, pieces))
    return runs


def our_runs(documents, vocab_file, seeds, whole_word, tmp_path):
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig
    from bert_keras.pretraining.keyed import bucket_instances, chunk_records, make_plan, scatter_range
    corpus = tmp_path / "valid.txt"
    corpus.write_text("".join("\n".join(d) + "\n\n" for d in documents), encoding="utf-8")
    pre = BertPreprocessor(vocab_file, lower_case=True)
    mask_id = pre.vocab.index("[MASK]")
    continuation = np.array([t.startswith("##") for t in pre.vocab])
    spec = {"input_ids": tf.io.FixedLenFeature([SEQ], tf.int64), "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
            "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
            "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    runs = []
    for seed in seeds:
        plan = make_plan([str(corpus)], 1, MaskingConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                                         dupe_factor=1, whole_word_mask=whole_word), seed, 0.25)
        assert plan.buckets >= 4
        parts = {}
        for r in range(len(plan.ranges)):
            for bucket, blob in scatter_range(plan, r).items():
                parts.setdefault(bucket, []).append(blob)
        frames = [f for b, blobs in parts.items() for _, chunk in bucket_instances(plan, b, blobs, pre).chunks
                  for *_, f in chunk_records(chunk)]
        f = {k: v.numpy() for k, v in tf.io.parse_example([x[12:-4] for x in frames], spec).items()}
        w = f["masked_lm_weights"] > 0
        token = np.take_along_axis(f["input_ids"], f["masked_lm_positions"], 1)[w]
        label = f["masked_lm_ids"][w]
        kinds = {"mask": int((token == mask_id).sum()), "same": int(((token != mask_id) & (token == label)).sum())}
        kinds["random"] = int(w.sum()) - kinds["mask"] - kinds["same"]
        runs.append(statistics(f["input_mask"].sum(1), f["next_sentence_labels"][:, 0], w.sum(1), kinds,
                               int(continuation[label].sum())))
    return runs


# Seeds of google's script (~2 s each on an idle core; it is the slow side) and of ours; BERT_KERAS_STAT_SEEDS
# scales both (e.g. 0.4 on a busy machine).
SCALE = float(os.environ.get("BERT_KERAS_STAT_SEEDS", "1"))


@pytest.mark.parametrize("whole_word, google_seeds, our_seeds", [(False, 100, 20), (True, 30, 10)])
def test_distributions_match_google_research_within_its_seed_spread(minilm_vocab, tmp_path, whole_word,
                                                                    google_seeds, our_seeds):
    google_seeds, our_seeds = max(5, round(google_seeds * SCALE)), max(5, round(our_seeds * SCALE))
    documents = wikitext_valid()
    google = google_runs(documents, minilm_vocab, range(google_seeds), whole_word)
    ours = our_runs(documents, minilm_vocab, range(1000, 1000 + our_seeds), whole_word, tmp_path)
    report = []
    for name in google[0]:
        g = np.array([r[name] for r in google], float)
        o = np.array([r[name] for r in ours], float)
        # Same distribution: the difference of the means has sd sigma * sqrt(1/n_o + 1/n_g); allow 4 of those,
        # with sigma the larger of the two seed spreads.
        sigma = max(g.std(ddof=1), o.std(ddof=1))
        bound = 4 * sigma * np.sqrt(1 / len(o) + 1 / len(g))
        report.append(f"{name}: google {g.mean():.4f} (sd {g.std(ddof=1):.4f}) ours {o.mean():.4f} "
                      f"(sd {o.std(ddof=1):.4f}) bound {bound:.4f}")
        assert abs(o.mean() - g.mean()) <= bound, "\n".join(report)
    print("\n".join(report))
