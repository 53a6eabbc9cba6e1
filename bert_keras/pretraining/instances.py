"""Pretraining instances, google-research/bert's create_pretraining_data.py recipe, on token ids and in NumPy.

Input: text files, one sentence per line, a blank line between documents. Each line is tokenized by the model's
own BertPreprocessor in tf.data (batched TF.Text kernels, not a Python tokenizer loop). Then, as google-research:

- documents shuffled; for each of `dupe_factor` passes, each document is cut into chunks of sentences filling
  `target_seq_length` (= max_seq_length - 3, or with probability `short_seq_prob` a random 2..max);
- segment A = the chunk's first `a_end` sentences; B = the rest ("is next", label 0) or, half of the time (always
  for a one-sentence chunk), sentences from a random other document ("random next", label 1; the unused
  sentences are put back);
- the pair is cut to max_seq_length - 3 by dropping a token from the front or back of the longer side at random;
- all pairs shuffled; [CLS] A [SEP] B [SEP];
- masking: candidates are all positions but [CLS]/[SEP] (whole words with `whole_word_mask`: a "##" piece joins
  the word before it), taken in random order while they fit: num_to_predict = min(max_predictions_per_seq,
  max(1, round(len * masked_lm_prob))), a word that would overflow it is skipped; each chosen token becomes
  [MASK] 80%, itself 10%, a random vocabulary id 10%.
The sentence-level steps (chunking, A/B split, random next) follow google-research's loop with one
`random.Random(seed)`, looking only at sentence lengths: A and B are spans of one flat token array. Truncation
and masking, the per-token work, run on every instance at once in NumPy (`np.random.default_rng(seed)`): the
same distributions with other draws, so for a given seed the instances are not google's script's. Same seed,
same bytes.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    whole_word_mask: bool = False


def read_documents(paths: list[str]) -> list[list[str]]:
    """Documents as lists of sentences: a blank line ends a document (google-research's input format)."""
    documents = [[]]
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    documents.append([])
                else:
                    documents[-1].append(line)
    return documents


def tokenize_documents(documents: list[list[str]], preprocessor, batch_size: int = 4096,
                       progress=None) -> list[list[list[int]]]:
    """Token ids of every sentence, tokenized in tf.data batches; empty documents and sentences dropped."""
    import tensorflow as tf
    lines = [s for d in documents for s in d]
    ids = []
    if lines:
        dataset = tf.data.Dataset.from_tensor_slices(lines).batch(batch_size).map(
            preprocessor.tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        for batch in dataset:
            flat, splits = batch.flat_values.numpy().tolist(), batch.row_splits.numpy().tolist()
            ids.extend(flat[s:e] for s, e in zip(splits[:-1], splits[1:]))
            if progress:
                progress(len(splits) - 1)
    out, k = [], 0
    for d in documents:
        sentences = [s for s in ids[k:k + len(d)] if s]
        k += len(d)
        if sentences:
            out.append(sentences)
    return out


def pairs_from_document(starts: list[list[int]], lengths: list[list[int]], index: int, config: MaskingConfig,
                        rng: random.Random) -> list:
    """google-research's create_instances_from_document up to truncation, on sentence spans of the flat token
    array: [(A start, A length, B start, B length, is_random_next)]. A and B are each consecutive sentences of
    one document, so each is one span; only sentence lengths are looked at here."""
    document, sizes = starts[index], lengths[index]
    max_tokens = config.max_seq_length - 3
    target = max_tokens
    if rng.random() < config.short_seq_prob:
        target = rng.randint(2, max_tokens)
    pairs, first, length, i = [], 0, 0, 0           # the chunk is sentences first..i of the document
    while i < len(document):
        length += sizes[i]
        if i == len(document) - 1 or length >= target:
            chunk = i - first + 1
            a_end = rng.randint(1, chunk - 1) if chunk >= 2 else 1
            a_length = sum(sizes[first:first + a_end])
            if chunk == 1 or rng.random() < 0.5:
                for _ in range(10):
                    other = rng.randint(0, len(starts) - 1)
                    if other != index:
                        break
                j = rng.randint(0, len(starts[other]) - 1)
                b_start, b_length = starts[other][j], 0
                for size in lengths[other][j:]:
                    b_length += size
                    if b_length >= target - a_length:
                        break
                pairs.append((document[first], a_length, b_start, b_length, True))
                i = first + a_end - 1                     # the unused sentences are put back
            else:
                pairs.append((document[first], a_length, document[first + a_end], length - a_length, False))
            first, length = i + 1, 0
        i += 1
    return pairs


def truncate_pairs(a_length: np.ndarray, b_length: np.ndarray, max_tokens: int, rng: np.random.Generator):
    """google-research's truncate_seq_pair for all pairs at once: while too long, drop one token of the longer
    segment (B on a tie) from its front or back at random. Which segment loses how many does not depend on the
    draws (closed form below); each drop is a fair front/back coin, so the front drops are Binomial(n, 1/2).
    Returns (A front drops, A length, B front drops, B length)."""
    excess = np.maximum(a_length + b_length - max_tokens, 0)
    gap = np.abs(a_length - b_length)
    longer_a = a_length > b_length
    first = np.minimum(excess, gap)                          # the longer one is cut down to the other's length
    rest = excess - first                                    # then B, A, B, A, ... one token each
    cut_a = np.where(longer_a, first, 0) + rest // 2
    cut_b = np.where(longer_a, 0, first) + rest - rest // 2
    return rng.binomial(cut_a, 0.5), a_length - cut_a, rng.binomial(cut_b, 0.5), b_length - cut_b


@dataclasses.dataclass
class VocabIds:
    """What the instance builder needs from a vocabulary (a list of tokens in id order)."""
    tokens: list[str]

    def __post_init__(self):
        index = {t: i for i, t in enumerate(self.tokens)}
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
        if missing:
            raise ValueError(f"the vocabulary has no {', '.join(missing)}: pretraining needs BERT's special tokens")
        self.cls_id, self.sep_id, self.mask_id = index["[CLS]"], index["[SEP]"], index["[MASK]"]
        self.size = len(self.tokens)
        self.continuation = np.array([t.startswith("##") for t in self.tokens])


def pack_pairs(tokens: np.ndarray, pairs: np.ndarray, vocab: VocabIds, config: MaskingConfig,
               rng: np.random.Generator) -> dict:
    """Pairs [N, 5] (spans of `tokens`, see pairs_from_document) -> truncated [CLS] A [SEP] B [SEP]:
    input_ids, input_mask, segment_ids [N, S] and next_sentence_labels [N, 1], int64."""
    a_drop, a_length, b_drop, b_length = truncate_pairs(pairs[:, 1], pairs[:, 3], config.max_seq_length - 3, rng)
    if (a_length < 1).any() or (b_length < 1).any():
        raise ValueError("a pretraining pair ended up with an empty segment: documents need at least two tokens "
                         "(google-research asserts the same)")
    a_start, b_start = (pairs[:, 0] + a_drop)[:, None], (pairs[:, 2] + b_drop)[:, None]
    a_length, b_length = a_length[:, None], b_length[:, None]
    column = np.arange(config.max_seq_length)[None, :]
    in_a = (column >= 1) & (column <= a_length)
    b_first = a_length + 2
    in_b = (column >= b_first) & (column < b_first + b_length)
    index = np.where(in_a, a_start + column - 1, np.where(in_b, b_start + column - b_first, 0))
    ids = np.where(in_a | in_b, tokens[index], 0)
    ids = np.where(column == 0, vocab.cls_id, ids)
    ids = np.where((column == a_length + 1) | (column == b_first + b_length), vocab.sep_id, ids)
    mask = column <= b_first + b_length
    return {"input_ids": ids.astype(np.int64), "input_mask": mask.astype(np.int64),
            "segment_ids": (mask & (column >= b_first)).astype(np.int64),
            "next_sentence_labels": pairs[:, 4:5].astype(np.int64)}


def mask_instances(features: dict, vocab: VocabIds, config: MaskingConfig, rng: np.random.Generator) -> dict:
    """Masks every packed instance at once (the recipe in the module docstring); adds masked_lm_positions,
    masked_lm_ids [N, P] int64 and masked_lm_weights [N, P] float32, 0-padded, positions ascending."""
    ids = features["input_ids"]
    n, s = ids.shape
    p = config.max_predictions_per_seq
    candidate = features["input_mask"].astype(bool) & (ids != vocab.cls_id) & (ids != vocab.sep_id)
    starts = candidate
    if config.whole_word_mask:                  # a "##" piece with a candidate before it continues that word
        before = np.cumsum(candidate, axis=1) - candidate > 0
        starts = candidate & ~(vocab.continuation[ids] & before)
    word = np.cumsum(starts, axis=1) - 1                                   # word index of each candidate
    words = starts.sum(axis=1)
    flat_word = (np.arange(n)[:, None] * s + word)[candidate]
    sizes = np.bincount(flat_word, minlength=n * s).reshape(n, s)          # [N, word] pieces per word
    keys = np.where(np.arange(s) < words[:, None], rng.random((n, s)), np.inf)
    order = np.argsort(keys, axis=1, kind="stable")                       # words in random order
    ordered = np.take_along_axis(sizes, order, axis=1)
    num_to_predict = np.minimum(p, np.maximum(1, np.rint(features["input_mask"].sum(1) * config.masked_lm_prob)))
    count = np.zeros(n, np.int64)
    taken = np.zeros((n, s), bool)
    for r in range(int(words.max(initial=0))):      # google's loop, one rank at a time for all instances
        take = (ordered[:, r] > 0) & (count + ordered[:, r] <= num_to_predict)
        count += np.where(take, ordered[:, r], 0)
        taken[:, r] = take
    chosen_words = np.zeros((n, s), bool)
    np.put_along_axis(chosen_words, order, taken, axis=1)
    chosen = candidate & np.take_along_axis(chosen_words, np.maximum(word, 0), axis=1)
    where = np.nonzero(chosen)
    k = len(where[0])
    draw, keep, random_ids = rng.random(k), rng.random(k), rng.integers(0, vocab.size, k)
    original = ids[where]
    masked = ids.copy()
    masked[where] = np.where(draw < 0.8, vocab.mask_id, np.where(keep < 0.5, original, random_ids))
    positions = np.zeros((n, p), np.int64)                                 # chosen positions, ascending, 0-padded
    rank = np.cumsum(chosen, axis=1) - 1
    positions[where[0], rank[where]] = where[1]
    real = np.arange(p) < chosen.sum(axis=1)[:, None]
    return {**features, "input_ids": masked,
            "masked_lm_positions": positions,
            "masked_lm_ids": np.where(real, np.take_along_axis(ids, positions, axis=1), 0).astype(np.int64),
            "masked_lm_weights": real.astype(np.float32)}


def create_instances(documents: list[list[list[int]]], vocab_tokens: list[str], config: MaskingConfig,
                     seed: int = 12345, progress=None) -> dict:
    """All instances of `dupe_factor` passes over the tokenized documents, shuffled, as google-research's
    features: {name: array [N, ...]} (see records.feature_spec)."""
    rng = random.Random(seed)
    documents = list(documents)
    rng.shuffle(documents)
    vocab = VocabIds(vocab_tokens)
    lengths = [[len(s) for s in d] for d in documents]
    tokens = np.fromiter(itertools.chain.from_iterable(s for d in documents for s in d), np.int64,
                         sum(map(sum, lengths)))
    ends = np.cumsum([n for d in lengths for n in d]).tolist()
    starts, k = [], 0
    for d in lengths:
        starts.append([e - n for e, n in zip(ends[k:k + len(d)], d)])
        k += len(d)
    pairs = []
    for _ in range(config.dupe_factor):
        for index in range(len(documents)):
            pairs.extend(pairs_from_document(starts, lengths, index, config, rng))
            if progress:
                progress(1)
    rng.shuffle(pairs)
    np_rng = np.random.default_rng(seed)
    features = pack_pairs(tokens, np.array(pairs, np.int64).reshape(-1, 5), vocab, config, np_rng)
    return mask_instances(features, vocab, config, np_rng)
