"""Pretraining instances, google-research/bert's create_pretraining_data.py recipe, on token ids and in NumPy:
the steps the keyed generator (keyed.py) runs on each bucket of documents.

Input: documents as lists of sentences. Each line is tokenized by the model's own BertPreprocessor (batched
TF.Text kernels, not a Python tokenizer loop; see tokenize_documents). Then, as google-research:

- for each of `dupe_factor` passes, each document is cut into chunks of sentences filling
  `target_seq_length` (= max_seq_length - 3, or with probability `short_seq_prob` a random 2..max);
- segment A = the chunk's first `a_end` sentences; B = the rest ("is next", label 0) or, half of the time (always
  for a one-sentence chunk), sentences from a random other document ("random next", label 1; the unused
  sentences are put back);
- the pair is cut to max_seq_length - 3 by dropping a token from the front or back of the longer side at random;
- [CLS] A [SEP] B [SEP];
- masking: candidates are all positions but [CLS]/[SEP] (whole words with `whole_word_mask`: a "##" piece joins
  the word before it), taken in random order while they fit: num_to_predict = min(max_predictions_per_seq,
  max(1, round(len * masked_lm_prob))), a word that would overflow it is skipped; each chosen token becomes
  [MASK] 80%, itself 10%, a random vocabulary id 10%.
The sentence-level steps (chunking, A/B split, random next) look only at sentence lengths, for every document
of a pass at once (chunk_pairs): A and B are spans of one flat token array. Truncation and masking, the
per-token work, run on a batch of instances at a time in NumPy (pack_pairs, mask_instances). Both are google's
distributions with other draws, so for a given seed the instances are not google's script's; the keyed
generator's random instance keys take the place of google's final shuffle.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from bert_keras.pretraining.parallel import default_threads, ordered_map


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """How pretraining instances are cut and masked: google-research/bert create_pretraining_data.py's flags.

    Each document is packed into NSP pairs of at most `max_seq_length` tokens (a shorter target length with
    probability `short_seq_prob`), then `masked_lm_prob` of the tokens, at most `max_predictions_per_seq`, are
    chosen for prediction: 80% become [MASK], 10% a random token, 10% stay. The corpus is read `dupe_factor`
    times with different masks.

    Args:
        max_seq_length: int. Tokens per instance, [CLS] and both [SEP]s included (the records' sequence length).
        max_predictions_per_seq: int. Masked positions per instance (the records' prediction slots).
        masked_lm_prob: float. The share of tokens to predict.
        short_seq_prob: float. The probability of a shorter target length (2 to max_seq_length tokens), so the
            model also sees short sequences.
        dupe_factor: int. Passes over the corpus, each with its own masking.
        whole_word_mask: bool. Mask all pieces of a word together (google-research's whole-word-masking models).

    Example:
        >>> config = bert_keras.pretraining.MaskingConfig(max_seq_length=64, max_predictions_per_seq=10)
        >>> config.masked_lm_prob, config.dupe_factor
        (0.15, 10)
    """
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    whole_word_mask: bool = False


@dataclasses.dataclass
class TokenizedDocuments:
    """A corpus as token ids: every sentence's ids back to back (`tokens` [T] int32, documents in order) and each
    document's sentence lengths (empty documents and sentences dropped). No Python list per sentence."""
    tokens: np.ndarray
    lengths: list[list[int]]

    def __len__(self):
        return len(self.lengths)


def tokenize_documents(documents: list[list[str]], preprocessor, batch_size: int = 16384,
                       progress=None, threads: int | None = None) -> TokenizedDocuments:
    """Every sentence tokenized by the model's own preprocessor: TF.Text kernels, up to `batch_size` lines a call.

    The calls run eagerly on a thread per core (TF runs an eager op without the GIL): no function to trace and
    every core busy. A call has a fixed cost besides its lines (Python dispatching its ops, under the GIL), so the
    lines are cut into as few calls as `batch_size` allows, a multiple of the thread count, all of one size
    (docs/performance.md). `threads`: default_threads() (one per core, at most 4)."""
    import tensorflow as tf

    def tokenize(first):
        ids = preprocessor.tokenize(tf.constant(lines[first:first + batch_size]))
        return ids.flat_values.numpy(), np.diff(ids.row_splits.numpy())

    lines = [s for d in documents for s in d]
    threads = threads or default_threads()
    calls = threads * max(1, -(-len(lines) // (threads * batch_size)))
    batch_size = max(1, -(-len(lines) // calls))
    flat, sizes = [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
    for ids, lengths in ordered_map(tokenize, range(0, len(lines), batch_size), threads):
        flat.append(ids)
        sizes.append(lengths)
        if progress:
            progress(len(lengths))
    sizes = np.concatenate(sizes).tolist()
    lengths, k = [], 0
    for d in documents:
        sentences = [n for n in sizes[k:k + len(d)] if n]
        k += len(d)
        if sentences:
            lengths.append(sentences)
    return TokenizedDocuments(np.concatenate(flat).astype(np.int32, copy=False), lengths)


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
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in self.tokens]
        if missing:
            raise ValueError(f"the vocabulary has no {', '.join(missing)}: pretraining needs BERT's special tokens")
        self.cls_id, self.sep_id, self.mask_id = (self.tokens.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
        self.size = len(self.tokens)

    @functools.cached_property
    def continuation(self) -> np.ndarray:
        """[V] bool: the token is a "##" piece (whole-word masking only)."""
        return np.array([t.startswith("##") for t in self.tokens])


def pack_pairs(tokens: np.ndarray, pairs: np.ndarray, vocab: VocabIds, config: MaskingConfig,
               rng: np.random.Generator) -> dict:
    """Pairs [N, 5] (spans of `tokens`, see chunk_pairs) -> truncated [CLS] A [SEP] B [SEP]:
    input_ids, input_mask, segment_ids [N, S] int32 and next_sentence_labels [N, 1] int64.
    tokens: [T + 1] int32, the corpus' ids and then one 0, which every padding position reads (made once per
    bucket, not once per batch)."""
    a_drop, a_length, b_drop, b_length = truncate_pairs(pairs[:, 1], pairs[:, 3], config.max_seq_length - 3, rng)
    if (a_length < 1).any() or (b_length < 1).any():
        raise ValueError("a pretraining pair ended up with an empty segment: documents need at least two tokens "
                         "(google-research asserts the same)")
    at = np.int32 if len(tokens) < 2 ** 31 else np.int64               # positions in the corpus
    a_start, b_start = (pairs[:, 0] + a_drop).astype(at)[:, None], (pairs[:, 2] + b_drop).astype(at)[:, None]
    a_length, b_length = a_length.astype(np.int32)[:, None], b_length.astype(np.int32)[:, None]
    column = np.arange(config.max_seq_length, dtype=np.int32)[None, :]
    b_first = a_length + 2
    mask = column <= b_first + b_length
    # Column c reads the corpus at A's start - 1 + c up to A's end, then at B's start - b_first + c; padding reads
    # the final 0. [CLS] and the [SEP]s read a neighbour (or that 0) and are overwritten.
    offset = np.where(column <= a_length, a_start - 1, b_start - b_first)
    ids = np.take(tokens, np.where(mask, offset + column, len(tokens) - 1))
    ids[:, 0] = vocab.cls_id
    ids[np.arange(len(ids)), a_length[:, 0] + 1] = vocab.sep_id
    ids[np.arange(len(ids)), (b_first + b_length)[:, 0]] = vocab.sep_id
    return {"input_ids": ids, "input_mask": mask.astype(np.int32),
            "segment_ids": (mask & (column >= b_first)).astype(np.int32),
            "next_sentence_labels": pairs[:, 4:5].astype(np.int64)}


def mask_instances(features: dict, vocab: VocabIds, config: MaskingConfig, rng: np.random.Generator) -> dict:
    """Masks every packed instance ([CLS] A [SEP] B [SEP], 0-padded) at once (the recipe in the module
    docstring); adds masked_lm_positions, masked_lm_ids [N, P] int32 and masked_lm_weights [N, P] float32,
    0-padded, positions ascending."""
    ids = features["input_ids"]
    n, s = ids.shape
    p = config.max_predictions_per_seq
    candidate = features["input_mask"].astype(bool) & (ids != vocab.cls_id) & (ids != vocab.sep_id)
    num_to_predict = np.minimum(p, np.maximum(1, np.rint(features["input_mask"].sum(1) * config.masked_lm_prob)))
    if config.whole_word_mask:
        positions, chosen = _choose_whole_word_positions(ids, candidate, num_to_predict, vocab, config, rng)
    else:
        # Every word is one token: google's loop takes the first num_to_predict candidates of a random order.
        # Candidate k (0-based) sits at k + 1, or k + 2 once past A's [SEP].
        words = candidate.sum(1)
        k = np.minimum(num_to_predict, words).astype(np.int64)
        picks = _choose_k_of_n(k, words, p, rng)                                     # [N, P] ascending
        chosen = np.arange(p) < k[:, None]
        a_length = (ids == vocab.sep_id).argmax(1)[:, None] - 1
        positions = np.where(chosen, picks + 1 + (picks >= a_length), 0)
    row, rank = np.nonzero(chosen)                 # chosen positions come first in each row, ascending
    at = row * s + positions[row, rank]            # flat indices into [N, S]: faster than (row, column)
    k = len(row)
    draw, keep, random_ids = rng.random(k), rng.random(k), rng.integers(0, vocab.size, k)
    original = np.take(ids, at)
    masked = ids.copy()
    masked.reshape(-1)[at] = np.where(draw < 0.8, vocab.mask_id, np.where(keep < 0.5, original, random_ids))
    labels = np.zeros((n, p), np.int32)
    labels[row, rank] = original
    return {**features, "input_ids": masked, "masked_lm_positions": positions.astype(np.int32),
            "masked_lm_ids": labels, "masked_lm_weights": chosen.astype(np.float32)}


def _choose_k_of_n(k: np.ndarray, n: np.ndarray, width: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random k[i]-subset of 0..n[i]-1 for every row i at once -> [rows, width] int64: row i's k[i]
    picks ascending, then padding (width >= k.max()).

    The first k of a random order, as google-research's shuffle-and-take gives for one-token words, drawn by
    Floyd's algorithm (for j = n-k .. n-1: take a random t in 0..j, or j itself when t is taken already): k
    steps over all rows instead of a sort of every row."""
    rows = np.arange(len(k))
    top = int(n.max(initial=0))
    taken = np.zeros((len(k), top + 1), bool)
    picks = np.full((len(k), width), top + 1, np.int64)                    # padding sorts last
    draws = rng.random((int(k.max(initial=0)), len(k)))
    for step, u in enumerate(draws):
        live = rows[step < k]
        j = n[live] - k[live] + step
        t = (u[live] * (j + 1)).astype(np.int64)                          # 0..j
        t = np.where(taken[live, t], j, t)
        taken[live, t] = True
        picks[live, step] = t
    return np.sort(picks, axis=1)


def _choose_whole_word_positions(ids, candidate, num_to_predict, vocab: VocabIds, config: MaskingConfig,
                                 rng: np.random.Generator):
    """Whole-word masking: the chosen words' pieces -> (positions [N, P] ascending then 0, chosen [N, P] bool)."""
    n, s = ids.shape
    # a "##" piece with a candidate before it continues that word
    before = np.cumsum(candidate, axis=1, dtype=np.int32) - candidate > 0
    starts = candidate & ~(vocab.continuation[ids] & before)
    word = np.cumsum(starts, axis=1, dtype=np.int32) - 1                  # word index of each candidate
    chosen_words = _choose_whole_words(candidate, word, word[:, -1] + 1, num_to_predict, config, rng)
    row_base = (np.arange(n, dtype=np.int64) * s)[:, None]                # flat indexing beats take_along_axis
    row, column = np.nonzero(candidate & chosen_words.reshape(-1)[np.maximum(word, 0) + row_base])
    per_row = np.bincount(row, minlength=n)
    positions = np.zeros((n, config.max_predictions_per_seq), np.int64)
    positions[row, _index_in_group(per_row)] = column                    # index among the row's positions
    return positions, np.arange(config.max_predictions_per_seq) < per_row[:, None]


def _choose_whole_words(candidate, word, words, num_to_predict, config: MaskingConfig,
                        rng: np.random.Generator) -> np.ndarray:
    """google-research's whole-word loop for every row at once: words (pieces counted) in random order, each
    taken while it fits num_to_predict, a word that would overflow it skipped -> [N, S] bool by word index."""
    n, s = candidate.shape
    p = config.max_predictions_per_seq
    flat_word = (np.arange(n)[:, None] * s + word)[candidate]
    sizes = np.bincount(flat_word, minlength=n * s).reshape(n, s)          # [N, word] pieces per word
    keys = rng.random((n, s))                                              # words in random key order
    keys[np.arange(s)[None] >= words[:, None]] = np.inf
    count = np.zeros(n, np.int64)
    chosen_words = np.zeros((n, s), bool)
    rows = np.arange(n)
    # One rank at a time for all instances: the first `top` ranks come from a partial sort (a row takes at most
    # p words, more ranks are needed only where whole words were skipped); rows still open after them get the
    # full order.
    top = min(s, 2 * p)
    if top < s:
        order = np.argpartition(keys, top - 1, axis=1)[:, :top]
        order = np.take_along_axis(order, np.argsort(np.take_along_axis(keys, order, axis=1), axis=1), axis=1)
    else:
        order = np.argsort(keys, axis=1)
    for r in range(s):
        if r == top:
            rows = np.nonzero((count < num_to_predict) & (words > top))[0]
            order = np.argsort(keys[rows], axis=1)
        if not (count[rows] < num_to_predict[rows]).any():         # every row full (or none left open)
            break
        w = order[:, r]
        size = sizes[rows, w]
        take = (size > 0) & (count[rows] + size <= num_to_predict[rows])
        count[rows] += np.where(take, size, 0)
        chosen_words[rows, w] |= take
    return chosen_words


BLOCK_SENTENCES = 1 << 20       # chunk_pairs' default: whole documents, about this many sentences at a time


def chunk_pairs(documents: TokenizedDocuments, config: MaskingConfig, rngs,
                block_sentences: int = BLOCK_SENTENCES) -> np.ndarray:
    """The sentence-level half of the recipe, google-research's create_instances_from_document up to
    truncation: one pass over every document for each generator in `rngs` (pass p draws from rngs[p]; the keyed
    generator gives `dupe_factor` of them) -> [N, 5] int64 (A start, A length, B start, B length,
    is_random_next), pass after pass, documents in order: spans of the flat token array (`documents.tokens`; A
    and B are each consecutive sentences of one document, so each is one span).

    google's loop walks a document chunk by chunk, and where the next chunk starts depends on the draws of the
    one before (a random next sentence puts the chunk's unused sentences back). Here every sentence gets the
    draws a chunk starting at it would use, so the chunk starting at each sentence, and the sentence after it,
    are computed for the whole corpus at once in NumPy; a document's chunks are the path from its first
    sentence through those successors, found by pointer doubling (log2 of the longest path in steps).
    Per chunk: a target length (per document and pass: max_seq_length - 3, or with probability short_seq_prob a
    random 2..max), sentences up to the first that reaches it, A = the first a_end of them (random 1..chunk-1),
    B = the rest, or (half of the time, always for a one-sentence chunk) sentences of a random other document
    from a random one on until they reach target - len(A). Same distributions as google's draws, other draws;
    the same generators give the same pairs (google shuffles the documents first; the order of the documents
    does not change these distributions). Documents go in blocks of about `block_sentences` sentences (a few
    hundred bytes of arrays a sentence: the block size bounds the memory; the draws, and so the pairs, depend on
    it)."""
    if block_sentences < 1:
        raise ValueError(f"block_sentences must be at least 1, got {block_sentences}")
    sizes = np.array([n for d in documents.lengths for n in d], np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes                                               # [S] each sentence's token span
    count = np.array([len(d) for d in documents.lengths], np.int64)     # [D] sentences of each document
    first = np.cumsum(count) - count                                    # [D] its first sentence
    last = first + count - 1                                            # [D] and its last
    blocks = np.searchsorted(first, np.arange(0, len(sizes), block_sentences)).tolist() + [len(count)]
    pairs = [np.zeros((0, 5), np.int64)]
    for rng in rngs:
        for lo, hi in zip(blocks[:-1], blocks[1:]):
            if lo < hi:
                pairs.append(_chunk_pairs(starts, ends, first, last, lo, hi, config, rng))
    return np.concatenate(pairs)


def _chunk_pairs(starts, ends, first, last, lo: int, hi: int, config: MaskingConfig, rng: np.random.Generator):
    """One pass over documents lo..hi-1 (see chunk_pairs; first/last: each document's first/last sentence)
    -> their pairs [P, 5]."""
    s = np.arange(first[lo], last[hi - 1] + 1)                          # [S] the block's sentences
    doc = np.repeat(np.arange(lo, hi), last[lo:hi] - first[lo:hi] + 1)  # [S] and their documents
    doc_last = last[doc]
    max_tokens = config.max_seq_length - 3
    short, size = rng.random((2, hi - lo))
    target = np.where(short < config.short_seq_prob, 2 + (size * (max_tokens - 1)).astype(np.int64),
                      max_tokens)[doc - lo]                             # randint(2, max_tokens)
    # The chunk starting at each sentence s: s..i, up to the first sentence that brings it to `target` tokens
    # (or the document's last); A = s..a_last; the next chunk starts after A when B is random (the rest is put
    # back), else after the chunk.
    u = rng.random((2, len(s)))
    i = np.minimum(np.searchsorted(ends, starts[s] + target), doc_last)
    chunk = i - s + 1
    a_last = s + np.where(chunk >= 2, (u[0] * (chunk - 1)).astype(np.int64), 0)     # a_end: randint(1, chunk-1)
    random_next = (chunk == 1) | (u[1] < 0.5)
    successor = np.where(random_next, a_last, i) + 1
    # The chunks google's loop visits: from each document's first sentence, successor after successor.
    at = _path_nodes(np.where(successor <= doc_last, successor - s[0], len(s)), first[lo:hi] - s[0])
    s, doc, target, i, a_last, random_next = s[at], doc[at], target[at], i[at], a_last[at], random_next[at]
    a_length = ends[a_last] - starts[s]
    # Random B: up to 10 tries at another document, from a random sentence of it until B reaches
    # target - len(A) tokens (at least one sentence).
    u = rng.random((11, len(s)))
    tries = (u[:10] * len(first)).astype(np.int64)
    other = tries[(tries != doc).argmax(0), np.arange(len(s))]        # the first that differs (or, as google's
                                                                        # loop ends, the document itself)
    b_first = first[other] + (u[10] * (last[other] - first[other] + 1)).astype(np.int64)
    b_last = np.minimum(np.maximum(_search_sorted(ends, starts[b_first] + target - a_length), b_first), last[other])
    b_start = np.where(random_next, starts[b_first], ends[a_last])
    b_length = np.where(random_next, ends[b_last] - starts[b_first], ends[i] - ends[a_last])
    return np.stack([starts[s], a_length, b_start, b_length, random_next.astype(np.int64)], 1)


def _search_sorted(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """np.searchsorted(values, keys) for keys in any order: searched in sorted order (NumPy starts each search
    where the last one ended, which is faster on a large corpus than keys at random)."""
    order = np.argsort(keys)
    found = np.empty(len(keys), np.int64)
    found[order] = np.searchsorted(values, keys[order])
    return found


def _index_in_group(lengths: np.ndarray) -> np.ndarray:
    """Consecutive groups of lengths[g] items -> each item's index in its group: [2, 3] -> [0, 1, 0, 1, 2]."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _path_nodes(successor: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Nodes 0..n-1 with successor[v] > v (n = the end): every node on the path from each head, in order.

    Pointer doubling: jumps[k][v] is the node 2**k steps after v and seen[v] how many nodes the first 2**k
    steps from v visit; the paths' lengths come out of seen, then the m-th node of a path is m's binary digits
    of jumps from its head."""
    n = len(successor)
    jump = np.append(successor, n)                                      # the end leads to itself
    seen = np.append(np.ones(n, np.int64), 0)
    jumps = [jump]
    while (jump[heads] < n).any():
        seen = seen + seen[jump]
        jump = jump[jump]
        jumps.append(jump)
    lengths = seen[heads]
    step = _index_in_group(lengths)
    node = np.repeat(heads, lengths)
    for k, jump in enumerate(jumps[:-1]):
        node = np.where(step >> k & 1, jump[node], node)
    return node
