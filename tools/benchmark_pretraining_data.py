"""Pretraining data creation speed: `bert_keras.pretraining.create_pretraining_data` against google-research's
create_pretraining_data.py logic, on the same corpus and settings, in one process.

    python tools/benchmark_pretraining_data.py [--input sentences.txt ...] [--dupe-factor 5] [--repeats 1]
                                               [--out benchmarks/results/pretraining_data.json]

The corpus is google-research's input format (one sentence per line, blank line between documents); by default
WikiText-2 valid + test from ../shared/data converted by tools/wikitext_to_sentences.py, or the test fixture
when ../shared is absent. The peer below re-implements google-research's pipeline as its Python does it (this
file's own code, same algorithm and data structures): its FullTokenizer (BasicTokenizer: clean text, CJK spacing,
whitespace split, lower + NFD accent strip, punctuation split; WordpieceTokenizer: greedy longest match, 100-char
limit) on every line, instances built on token strings with one random.Random, tokens converted to ids and every
instance written as a tf.train.Example through TFRecordWriter. Both sides use max_seq_length 128,
max_predictions_per_seq 20, masked_lm_prob 0.15, short_seq_prob 0.1 and the MiniLM (standard uncased) vocab.
Reported: seconds of each phase (setup = building the tokenizer, a fixed cost per run: ours builds TF.Text's
FastWordpiece model, ~0.1 s), sentences/s end to end (best of --repeats), and the ratios end to end, after setup
(what a corpus large enough to hide the fixed cost sees) and by phase (tokenize; instances and write together,
since ours truncates and masks a batch at a time while writing, google's while making instances).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import random
import sys
import tempfile
import time
import unicodedata

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))


# ---- the peer: google-research's pipeline, re-implemented --------------------------------------------------

def _is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _is_control(c):
    return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf")


def _is_punctuation(c):
    cp = ord(c)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(c).startswith("P")


def _is_cjk(cp):
    return 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or \
        0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or \
        0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F


class GoogleFullTokenizer:
    """BasicTokenizer + WordpieceTokenizer, character by character in Python as tokenization.py does."""

    def __init__(self, vocab_tokens: list[str]):
        self.vocab = collections.OrderedDict((t, i) for i, t in enumerate(vocab_tokens))

    def _basic(self, text):
        out = []
        for c in text:                                        # _clean_text
            cp = ord(c)
            if cp == 0 or cp == 0xFFFD or _is_control(c):
                continue
            out.append(" " if _is_whitespace(c) else c)
        text = "".join(out)
        out = []
        for c in text:                                        # _tokenize_chinese_chars
            out.append(f" {c} " if _is_cjk(ord(c)) else c)
        words = []
        for token in "".join(out).strip().split():
            token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                            if unicodedata.category(c) != "Mn")   # _run_strip_accents
            pieces, start_new = [], True                      # _run_split_on_punc
            for c in token:
                if _is_punctuation(c):
                    pieces.append([c])
                    start_new = True
                else:
                    if start_new:
                        pieces.append([])
                    start_new = False
                    pieces[-1].append(c)
            words.extend("".join(p) for p in pieces)
        return " ".join(words).strip().split()

    def _wordpiece(self, word):
        chars = list(word)
        if len(chars) > 100:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(chars):
            end, current = len(chars), None
            while start < end:
                s = "".join(chars[start:end])
                if start > 0:
                    s = "##" + s
                if s in self.vocab:
                    current = s
                    break
                end -= 1
            if current is None:
                return ["[UNK]"]
            pieces.append(current)
            start = end
        return pieces

    def tokenize(self, text):
        return [p for w in self._basic(text) for p in self._wordpiece(w)]

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]


def google_documents(path, tokenizer):
    documents = [[]]
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                documents.append([])
            else:
                tokens = tokenizer.tokenize(line)
                if tokens:
                    documents[-1].append(tokens)
    return [d for d in documents if d]


def google_masked_lm(tokens, masked_lm_prob, max_predictions, vocab_words, rng):
    cand = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(cand)
    output = list(tokens)
    num_to_predict = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked, covered = [], set()
    for index in cand:
        if len(masked) >= num_to_predict:
            break
        if index in covered:
            continue
        covered.add(index)
        if rng.random() < 0.8:
            token = "[MASK]"
        elif rng.random() < 0.5:
            token = tokens[index]
        else:
            token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
        output[index] = token
        masked.append((index, tokens[index]))
    masked.sort()
    return output, [i for i, _ in masked], [t for _, t in masked]


def google_instances_from_document(docs, index, max_seq_length, short_seq_prob, masked_lm_prob, max_predictions,
                                   vocab_words, rng):
    document = docs[index]
    max_tokens = max_seq_length - 3
    target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for s in chunk[:a_end] for t in s]
                b = []
                if len(chunk) == 1 or rng.random() < 0.5:
                    random_next = True
                    for _ in range(10):
                        other = rng.randint(0, len(docs) - 1)
                        if other != index:
                            break
                    for s in docs[other][rng.randint(0, len(docs[other]) - 1):]:
                        b.extend(s)
                        if len(b) >= target - len(a):
                            break
                    i -= len(chunk) - a_end
                else:
                    random_next = False
                    b = [t for s in chunk[a_end:] for t in s]
                while len(a) + len(b) > max_tokens:
                    longer = a if len(a) > len(b) else b
                    if rng.random() < 0.5:
                        del longer[0]
                    else:
                        longer.pop()
                tokens = ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
                segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
                tokens, positions, labels = google_masked_lm(tokens, masked_lm_prob, max_predictions, vocab_words,
                                                             rng)
                instances.append((tokens, segments, random_next, positions, labels))
            chunk, length = [], 0
        i += 1
    return instances


def google_write(instances, tokenizer, max_seq_length, max_predictions, path):
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    with tf.io.TFRecordWriter(path) as writer:
        for tokens, segments, random_next, positions, labels in instances:
            ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = max_seq_length - len(ids)
            label_ids = tokenizer.convert_tokens_to_ids(labels)
            mpad = max_predictions - len(positions)
            features = collections.OrderedDict()
            features["input_ids"] = ints(ids + [0] * pad)
            features["input_mask"] = ints([1] * len(ids) + [0] * pad)
            features["segment_ids"] = ints(list(segments) + [0] * pad)
            features["masked_lm_positions"] = ints(list(positions) + [0] * mpad)
            features["masked_lm_ids"] = ints(label_ids + [0] * mpad)
            features["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0] * len(label_ids) + [0.0] * mpad))
            features["next_sentence_labels"] = ints([1 if random_next else 0])
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())


def run_google(path, vocab_tokens, dupe_factor, seed, out):
    times = {}
    t = time.perf_counter()
    tokenizer = GoogleFullTokenizer(vocab_tokens)
    times["setup"] = time.perf_counter() - t
    t = time.perf_counter()
    docs = google_documents(path, tokenizer)
    times["tokenize"] = time.perf_counter() - t
    t = time.perf_counter()
    rng = random.Random(seed)
    rng.shuffle(docs)
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(docs)):
            instances.extend(google_instances_from_document(docs, index, 128, 0.1, 0.15, 20, vocab_tokens, rng))
    rng.shuffle(instances)
    times["instances"] = time.perf_counter() - t
    t = time.perf_counter()
    google_write(instances, tokenizer, 128, 20, out)
    times["write"] = time.perf_counter() - t
    return times, len(instances)


# ---- ours ---------------------------------------------------------------------------------------------------

def run_ours(path, vocab_path, dupe_factor, seed, out):
    from bert_keras import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_instances, read_documents, tokenize_documents, \
        write_records
    times = {}
    t = time.perf_counter()
    preprocessor = BertPreprocessor(vocab_path, lower_case=True)
    times["setup"] = time.perf_counter() - t
    t = time.perf_counter()
    documents = tokenize_documents(read_documents([path]), preprocessor)
    times["tokenize"] = time.perf_counter() - t
    config = MaskingConfig(dupe_factor=dupe_factor)
    t = time.perf_counter()
    instances = create_instances(documents, list(preprocessor.vocab), config, seed)    # the sentence-level loop
    times["instances"] = time.perf_counter() - t
    t = time.perf_counter()
    write_records(instances, [out])                  # truncation and masking happen here, a batch at a time
    times["write"] = time.perf_counter() - t
    return times, instances.num_instances


def default_corpus(folder: str) -> str:
    shared = REPO.parent / "shared" / "data" / "wikitext-2"
    if not shared.exists():
        return str(REPO / "tests" / "fixtures" / "pretraining_corpus.txt")
    from wikitext_to_sentences import articles
    path = os.path.join(folder, "wikitext2_valid_test_sentences.txt")
    with open(path, "w", encoding="utf-8") as f:
        for name in ("valid.txt", "test.txt"):
            for article in articles(str(shared / name)):
                f.write("\n".join(article) + "\n\n")
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--input", help="a corpus in google-research's format (default: WikiText-2 valid+test)")
    p.add_argument("--dupe-factor", type=int, default=5)
    p.add_argument("--repeats", type=int, default=1, help="runs of each side, interleaved; the best is kept")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pretraining_data.json"))
    args = p.parse_args(argv)
    from bert_keras.demo import minilm_folder
    from bert_keras.preprocessing.vocab import load_vocab
    vocab_path = os.path.join(minilm_folder(), "vocab.txt")
    vocab_tokens = list(load_vocab(vocab_path))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.input or default_corpus(tmp)
        with open(corpus, encoding="utf-8") as f:
            sentences = sum(1 for line in f if line.strip())
        results = {"corpus": corpus if args.input else os.path.basename(corpus), "sentences": sentences,
                   "dupe_factor": args.dupe_factor, "max_seq_length": 128, "max_predictions_per_seq": 20}
        runs = {"google_research": lambda: run_google(corpus, vocab_tokens, args.dupe_factor, args.seed,
                                                      os.path.join(tmp, "google.tfrecord")),
                "ours": lambda: run_ours(corpus, vocab_path, args.dupe_factor, args.seed,
                                         os.path.join(tmp, "ours.tfrecord"))}
        best, instances = {}, {}
        for _ in range(args.repeats):                 # interleaved, so a noisy spell hits both sides alike
            for name, run in runs.items():
                times, instances[name] = run()
                if name not in best or sum(times.values()) < sum(best[name].values()):
                    best[name] = times
        for name, times in best.items():
            total = sum(times.values())
            results[name] = {"instances": instances[name], "seconds": {k: round(v, 3) for k, v in times.items()},
                             "total_s": round(total, 3), "sentences_per_s": round(sentences / total, 1),
                             "after_setup_s": round(total - times["setup"], 3)}
            print(name, json.dumps(results[name]), flush=True)
    g, o = results["google_research"], results["ours"]
    results["speedup"] = round(g["total_s"] / o["total_s"], 2)
    results["speedup_after_setup"] = round(g["after_setup_s"] / o["after_setup_s"], 2)
    # Ours truncates and masks while writing (a batch at a time), google's while making instances: the two
    # phases are compared together.
    both = lambda r: r["seconds"]["instances"] + r["seconds"]["write"]            # noqa: E731
    results["speedup_by_phase"] = {"tokenize": round(g["seconds"]["tokenize"] / o["seconds"]["tokenize"], 2),
                                   "instances_and_write": round(both(g) / both(o), 2)}
    print("speed-up:", results["speedup"], "after setup:", results["speedup_after_setup"], results["speedup_by_phase"])
    from bert_keras.atomic import write_json
    write_json(args.out, results)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
