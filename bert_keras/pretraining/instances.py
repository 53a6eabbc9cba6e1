"""Pretraining instances as google-research/bert's create_pretraining_data.py makes them, on token ids.

Input: text files, one sentence per line, a blank line between documents. Each line is tokenized by the model's
own BertPreprocessor in tf.data (batched TF.Text kernels, not a Python tokenizer loop); everything after that is
google-research's algorithm, step for step and draw for draw on one `random.Random(seed)`:

- documents shuffled; for each of `dupe_factor` passes, each document is cut into chunks of sentences filling
  `target_seq_length` (= max_seq_length - 3, or with probability `short_seq_prob` a random 2..max);
- segment A = the chunk's first `a_end` sentences; B = the rest ("is next", label 0) or, half of the time (always
  for a one-sentence chunk), sentences from a random other document ("random next", label 1; the unused
  sentences are put back);
- the pair is cut to max_seq_length - 3 by dropping a token from the front or back of the longer side at random;
- masking: candidates are all positions but [CLS]/[SEP] (whole words with `whole_word_mask`), shuffled;
  num_to_predict = min(max_predictions_per_seq, max(1, round(len * masked_lm_prob))); each chosen token becomes
  [MASK] 80%, itself 10%, a random vocabulary token 10%;
- all instances shuffled.
Because the draws are the same, the same seed gives the same bytes, run after run.
Tokens are ids here (google-research works on strings and converts at the end): a "##" continuation is an id
whose vocabulary entry starts with "##", and a random token is `rng.randint(0, vocab_size - 1)`, the index google
draws into its vocab list.
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass
class Instance:
    ids: list[int]                # [CLS] A [SEP] B [SEP], after masking
    segment_ids: list[int]
    is_random_next: bool
    masked_lm_positions: list[int]
    masked_lm_ids: list[int]      # the original ids at those positions


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


def tokenize_documents(documents: list[list[str]], preprocessor, batch_size: int = 1024) -> list[list[list[int]]]:
    """Token ids of every sentence, tokenized in tf.data batches; empty documents and sentences dropped."""
    import tensorflow as tf
    lines = [s for d in documents for s in d]
    ids = []
    if lines:
        dataset = tf.data.Dataset.from_tensor_slices(lines).batch(batch_size).map(preprocessor.tokenize)
        for batch in dataset:
            ids.extend(batch.to_list())
    out, k = [], 0
    for d in documents:
        sentences = [s for s in ids[k:k + len(d)] if s]
        k += len(d)
        if sentences:
            out.append(sentences)
    return out


def _truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def mask_tokens(ids: list[int], config: MaskingConfig, special: set[int], continuation: np.ndarray,
                vocab_size: int, mask_id: int, rng: random.Random):
    """(masked ids, positions, original ids at the positions): google-research's create_masked_lm_predictions."""
    candidates: list[list[int]] = []
    for i, token in enumerate(ids):
        if token in special:
            continue
        if config.whole_word_mask and candidates and continuation[token]:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    rng.shuffle(candidates)
    output = list(ids)
    num_to_predict = min(config.max_predictions_per_seq, max(1, int(round(len(ids) * config.masked_lm_prob))))
    masked: list[tuple[int, int]] = []
    covered: set[int] = set()
    for index_set in candidates:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(i in covered for i in index_set):
            continue
        for i in index_set:
            covered.add(i)
            if rng.random() < 0.8:
                replacement = mask_id
            elif rng.random() < 0.5:
                replacement = ids[i]
            else:
                replacement = rng.randint(0, vocab_size - 1)
            output[i] = replacement
            masked.append((i, ids[i]))
    masked.sort()
    return output, [p for p, _ in masked], [t for _, t in masked]


def instances_from_document(documents, index: int, config: MaskingConfig, vocab, rng: random.Random) -> list:
    """google-research's create_instances_from_document; `vocab` supplies the special ids and continuations."""
    document = documents[index]
    max_tokens = config.max_seq_length - 3
    target = max_tokens
    if rng.random() < config.short_seq_prob:
        target = rng.randint(2, max_tokens)
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
                    is_random_next = True
                    target_b = target - len(a)
                    for _ in range(10):
                        other = rng.randint(0, len(documents) - 1)
                        if other != index:
                            break
                    random_document = documents[other]
                    for s in random_document[rng.randint(0, len(random_document) - 1):]:
                        b.extend(s)
                        if len(b) >= target_b:
                            break
                    i -= len(chunk) - a_end
                else:
                    is_random_next = False
                    b = [t for s in chunk[a_end:] for t in s]
                _truncate_pair(a, b, max_tokens, rng)
                if not a or not b:
                    raise ValueError("a pretraining pair ended up with an empty segment: documents need at least "
                                     "two tokens (google-research asserts the same)")
                ids = [vocab.cls_id, *a, vocab.sep_id, *b, vocab.sep_id]
                segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
                ids, positions, labels = mask_tokens(ids, config, vocab.special, vocab.continuation,
                                                     vocab.size, vocab.mask_id, rng)
                instances.append(Instance(ids, segments, is_random_next, positions, labels))
            chunk, length = [], 0
        i += 1
    return instances


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
        self.special = {self.cls_id, self.sep_id}
        self.size = len(self.tokens)
        self.continuation = np.array([t.startswith("##") for t in self.tokens])


def create_instances(documents: list[list[list[int]]], vocab_tokens: list[str], config: MaskingConfig,
                     seed: int = 12345, progress=None) -> list[Instance]:
    """All instances of `dupe_factor` passes over the tokenized documents, shuffled (google-research's order)."""
    rng = random.Random(seed)
    documents = list(documents)
    rng.shuffle(documents)
    vocab = VocabIds(vocab_tokens)
    instances = []
    for _ in range(config.dupe_factor):
        for index in range(len(documents)):
            instances.extend(instances_from_document(documents, index, config, vocab, rng))
            if progress:
                progress(1)
    rng.shuffle(instances)
    return instances
