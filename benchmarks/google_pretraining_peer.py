"""The peer of benchmarks/benchmark_pretraining_scale.py: google-research's create_pretraining_data.py pipeline,
re-implemented step for step as its Python does it (this file's own code; same classes, loops and data
structures): FullTokenizer (BasicTokenizer: clean text, CJK spacing, whitespace split, lower + NFD accent strip,
punctuation split; WordpieceTokenizer: greedy longest match, 100-char limit) on every line; instances built on
token strings with one random.Random (TrainingInstance objects, candidate index sets, MaskedLmInstance tuples,
[CLS] A [SEP] B [SEP] and the padding appended token by token); every instance converted to ids and written as a
tf.train.Example through TFRecordWriter. max_seq_length 128, max_predictions_per_seq 20, masked_lm_prob 0.15,
short_seq_prob 0.1.

    run_google(corpus, vocab, dupe_factor, seed, out) -> ({phase: seconds}, instances, tokens)
"""

from __future__ import annotations

import argparse
import collections
import random
import time
import unicodedata


# ---- the peer: google-research's pipeline, re-implemented --------------------------------------------------
# Step for step as create_pretraining_data.py and tokenization.py do it (same classes, loops and Python data
# structures; absl's FLAGS replaced by a plain object, which is faster to read).

def _to_text(text):                                           # tokenization.convert_to_unicode on Python 3
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"unsupported string type: {type(text)}")


def _split_whitespace(text):                                  # tokenization.whitespace_tokenize
    text = text.strip()
    return text.split() if text else []


def _is_whitespace(c):
    if c == " " or c == "\t" or c == "\n" or c == "\r":
        return True
    return unicodedata.category(c) == "Zs"


def _is_control(c):
    if c == "\t" or c == "\n" or c == "\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def _is_punctuation(c):
    cp = ord(c)
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(c).startswith("P")


class GoogleBasicTokenizer:
    """Clean text, space out CJK characters, split on whitespace, lower + strip accents, split on punctuation."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        text = self._tokenize_chinese_chars(self._clean_text(_to_text(text)))
        split_tokens = []
        for token in _split_whitespace(text):
            if self.do_lower_case:
                token = self._run_strip_accents(token.lower())
            split_tokens.extend(self._run_split_on_punc(token))
        return _split_whitespace(" ".join(split_tokens))

    def _run_strip_accents(self, text):
        out = []
        for c in unicodedata.normalize("NFD", text):
            if unicodedata.category(c) == "Mn":
                continue
            out.append(c)
        return "".join(out)

    def _run_split_on_punc(self, text):
        chars, i, start_new_word, out = list(text), 0, True, []
        while i < len(chars):
            c = chars[i]
            if _is_punctuation(c):
                out.append([c])
                start_new_word = True
            else:
                if start_new_word:
                    out.append([])
                start_new_word = False
                out[-1].append(c)
            i += 1
        return ["".join(x) for x in out]

    def _tokenize_chinese_chars(self, text):
        out = []
        for c in text:
            if self._is_chinese_char(ord(c)):
                out.append(" ")
                out.append(c)
                out.append(" ")
            else:
                out.append(c)
        return "".join(out)

    def _is_chinese_char(self, cp):
        return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF) or
                (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
                (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))

    def _clean_text(self, text):
        out = []
        for c in text:
            cp = ord(c)
            if cp == 0 or cp == 0xFFFD or _is_control(c):
                continue
            if _is_whitespace(c):
                out.append(" ")
            else:
                out.append(c)
        return "".join(out)


class GoogleWordpieceTokenizer:
    """Greedy longest-match-first over each whitespace-separated word; a word over 100 characters is [UNK]."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=100):
        self.vocab, self.unk_token, self.max_input_chars_per_word = vocab, unk_token, max_input_chars_per_word

    def tokenize(self, text):
        output_tokens = []
        for token in _split_whitespace(_to_text(text)):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            is_bad, start, sub_tokens = False, 0, []
            while start < len(chars):
                end, cur_substr = len(chars), None
                while start < end:
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end
            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


def google_load_vocab(vocab_file):
    vocab, index = collections.OrderedDict(), 0
    with open(vocab_file, encoding="utf-8") as reader:
        while True:
            token = _to_text(reader.readline())
            if not token:
                break
            vocab[token.strip()] = index
            index += 1
    return vocab


class GoogleFullTokenizer:
    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = google_load_vocab(vocab_file)
        self.basic_tokenizer = GoogleBasicTokenizer(do_lower_case)
        self.wordpiece_tokenizer = GoogleWordpieceTokenizer(self.vocab)

    def tokenize(self, text):
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            for sub_token in self.wordpiece_tokenizer.tokenize(token):
                split_tokens.append(sub_token)
        return split_tokens

    def convert_tokens_to_ids(self, tokens):                 # tokenization.convert_by_vocab
        output = []
        for item in tokens:
            output.append(self.vocab[item])
        return output


class GoogleTrainingInstance:
    def __init__(self, tokens, segment_ids, masked_lm_positions, masked_lm_labels, is_random_next):
        self.tokens, self.segment_ids, self.is_random_next = tokens, segment_ids, is_random_next
        self.masked_lm_positions, self.masked_lm_labels = masked_lm_positions, masked_lm_labels


GoogleMaskedLm = collections.namedtuple("GoogleMaskedLm", ["index", "label"])
GOOGLE_FLAGS = argparse.Namespace(do_whole_word_mask=False)


def google_documents(path, tokenizer):
    documents = [[]]
    with open(path, encoding="utf-8") as reader:
        for line in reader:
            line = _to_text(line).strip()
            if not line:
                documents.append([])
            else:
                tokens = tokenizer.tokenize(line)
                if tokens:
                    documents[-1].append(tokens)
    return [d for d in documents if d]


def google_masked_lm(tokens, masked_lm_prob, max_predictions, vocab_words, rng):
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token == "[CLS]" or token == "[SEP]":
            continue
        if GOOGLE_FLAGS.do_whole_word_mask and len(cand_indexes) >= 1 and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms, covered = [], set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:     # a whole word that would overflow: skipped
            continue
        is_any_index_covered = False
        for index in index_set:
            if index in covered:
                is_any_index_covered = True
                break
        if is_any_index_covered:
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append(GoogleMaskedLm(index=index, label=tokens[index]))
    masked_lms = sorted(masked_lms, key=lambda x: x.index)
    positions, labels = [], []
    for m in masked_lms:
        positions.append(m.index)
        labels.append(m.label)
    return output_tokens, positions, labels


def google_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def google_instances_from_document(docs, index, max_seq_length, short_seq_prob, masked_lm_prob, max_predictions,
                                   vocab_words, rng):
    document = docs[index]
    max_num_tokens = max_seq_length - 3
    target = rng.randint(2, max_num_tokens) if rng.random() < short_seq_prob else max_num_tokens
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        segment = document[i]
        chunk.append(segment)
        length += len(segment)
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(chunk[j])
                tokens_b = []
                if len(chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target - len(tokens_a)
                    for _ in range(10):
                        other = rng.randint(0, len(docs) - 1)
                        if other != index:
                            break
                    random_document = docs[other]
                    for j in range(rng.randint(0, len(random_document) - 1), len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(chunk) - a_end                   # the unused sentences are put back
                else:
                    is_random_next = False
                    for j in range(a_end, len(chunk)):
                        tokens_b.extend(chunk[j])
                google_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                assert len(tokens_a) >= 1 and len(tokens_b) >= 1
                tokens, segment_ids = ["[CLS]"], [0]
                for token in tokens_a:
                    tokens.append(token)
                    segment_ids.append(0)
                tokens.append("[SEP]")
                segment_ids.append(0)
                for token in tokens_b:
                    tokens.append(token)
                    segment_ids.append(1)
                tokens.append("[SEP]")
                segment_ids.append(1)
                tokens, positions, labels = google_masked_lm(tokens, masked_lm_prob, max_predictions, vocab_words,
                                                             rng)
                instances.append(GoogleTrainingInstance(tokens, segment_ids, positions, labels, is_random_next))
            chunk, length = [], 0
        i += 1
    return instances


def google_write(instances, tokenizer, max_seq_length, max_predictions, path):
    import tensorflow as tf

    def create_int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def create_float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

    writers = [tf.io.TFRecordWriter(path)]
    writer_index = 0
    for instance in instances:
        input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
        input_mask = [1] * len(input_ids)
        segment_ids = list(instance.segment_ids)
        assert len(input_ids) <= max_seq_length
        while len(input_ids) < max_seq_length:
            input_ids.append(0)
            input_mask.append(0)
            segment_ids.append(0)
        masked_lm_positions = list(instance.masked_lm_positions)
        masked_lm_ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
        masked_lm_weights = [1.0] * len(masked_lm_ids)
        while len(masked_lm_positions) < max_predictions:
            masked_lm_positions.append(0)
            masked_lm_ids.append(0)
            masked_lm_weights.append(0.0)
        features = collections.OrderedDict()
        features["input_ids"] = create_int_feature(input_ids)
        features["input_mask"] = create_int_feature(input_mask)
        features["segment_ids"] = create_int_feature(segment_ids)
        features["masked_lm_positions"] = create_int_feature(masked_lm_positions)
        features["masked_lm_ids"] = create_int_feature(masked_lm_ids)
        features["masked_lm_weights"] = create_float_feature(masked_lm_weights)
        features["next_sentence_labels"] = create_int_feature([1 if instance.is_random_next else 0])
        example = tf.train.Example(features=tf.train.Features(feature=features))
        writers[writer_index].write(example.SerializeToString())
        writer_index = (writer_index + 1) % len(writers)
    for writer in writers:
        writer.close()


def run_google(path, vocab_path, dupe_factor, seed, out):
    times = {}
    t = time.perf_counter()
    tokenizer = GoogleFullTokenizer(vocab_path)
    times["setup"] = time.perf_counter() - t
    t = time.perf_counter()
    docs = google_documents(path, tokenizer)
    times["tokenize"] = time.perf_counter() - t
    t = time.perf_counter()
    rng = random.Random(seed)
    rng.shuffle(docs)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(docs)):
            instances.extend(google_instances_from_document(docs, index, 128, 0.1, 0.15, 20, vocab_words, rng))
    rng.shuffle(instances)
    times["instances"] = time.perf_counter() - t
    t = time.perf_counter()
    google_write(instances, tokenizer, 128, 20, out)
    times["write"] = time.perf_counter() - t
    return times, len(instances), sum(len(s) for d in docs for s in d)
