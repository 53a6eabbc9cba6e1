"""Packed fine-tuning (`finetune --pack`, issue 49): several whole examples in each row of a fixed sequence length,
so that on the JAX route (XLA, one static shape for every batch) the step computes on tokens, not padding.

Data flow, on the host: raw examples -> the model's own BertPreprocessor (tf.data, the fixed --seq-length) ->
each example's real tokens -> rows of up to K examples (pack_examples) -> rows with `position_ids` (restarting at
each example's [CLS]), `packed_sequence_ids` (1..k, 0 at padding), `cls_positions` [K], targets [K] and weights
[K] (1 for an example, 0 for an empty slot) -> the classifier's packed call (logits [B, K, C], one head on each
example's pooled [CLS]) and its loss averaged over the examples (tasks/classifier.py: packed_loss). A tagger's
targets are its piece labels laid out as the tokens are ([B, S], IGNORE off labelled pieces and at padding): its
packed call labels every token, and Keras' compiled loss, a mean over labelled pieces, is unchanged. Evaluation,
predict and the saved model.keras stay one example per row: packing is a training-input detail.

Which packer, and K. Fine-tuning sentences are short: SST-2's training phrases hold 13.3 WordPiece tokens on
average (MiniLM's vocab; 90% under 27), so at length 128 a row could hold 9.6 of them by tokens, and the limit
is the number per row. pretraining/packing.py's pack_lengths stops at 3 a row (its exact-fit greedy fills rows
with a leader and a pair); best-fit decreasing on the histogram (SPFHP's rule) with a count cap leaves the many
short phrases to open rows of their own (5.7 per row at K = 8). pack_examples instead takes the longest example
left and fills its row with the shortest ones left while they fit (two pointers over the sorted lengths, O(N log
N)): on SST-2 train at 128 it reaches 3.00, 4.00, 5.98, 7.37 and 9.0 examples per row at K = 3, 4, 6, 8 and 16
(the bounds min(K, 9.6): 3, 4, 6, 8, 9.6). K = 8 is the default: 7.4 examples a row, where K = 3 would cap the
gain at 3x, less the last layer every token now needs (the unpacked classifier computes it for [CLS] only: 1/L
of the encoder); beyond 8 a row gains little more (9.0 at 16) and a step of 32 examples is already 4 rows.

Determinism: the examples are shuffled once with the run's seed and packed 4,096 at a time; the rows are then
reshuffled every epoch by tf.data with the seed (resume replays the same order, as unpacked). `--batch-size`
stays examples per step: a step takes round(batch_size x rows / examples) rows (at least 1, a multiple of the
devices), so the learning-rate recipe is unchanged.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_keras.pretraining.packing import lay_out_rows

DEFAULT_EXAMPLES_PER_ROW = 8
WINDOW = 4096                     # examples packed together


def pack_examples(lengths, max_seq_length: int, max_per_row: int = DEFAULT_EXAMPLES_PER_ROW) -> np.ndarray:
    """Examples (by their lengths) -> rows of at most `max_seq_length` tokens and `max_per_row` examples: each
    row takes the longest example left, then the shortest left while they fit (module docstring).

    Args:
        lengths: [N] integers, 1 to max_seq_length: each example's tokens.
        max_seq_length: int. Tokens per row.
        max_per_row: int, 1 or more. Examples a row holds at most (K).

    Returns:
        [R, max_per_row] int64: each row's examples as indices into `lengths`, ascending, then -1. Every index is
        in exactly one row; rows are ordered by their first index. The same lengths give the same rows.

    Example:
        >>> pack_examples([3, 1, 4, 1], max_seq_length=5, max_per_row=3).tolist()
        [[0, 3, -1], [1, 2, -1]]
    """
    lengths = np.asarray(lengths, np.int64)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be a list of integers, got shape {lengths.shape}")
    if max_per_row < 1:
        raise ValueError(f"max_per_row must be 1 or more, got {max_per_row}")
    if lengths.size and (lengths.min() < 1 or lengths.max() > max_seq_length):
        raise ValueError(f"every length must be 1 to max_seq_length = {max_seq_length}, got "
                         f"{lengths.min()} to {lengths.max()}")
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    rows, lo, hi = [], 0, len(lengths) - 1
    while lo <= hi:
        row, used = [order[hi]], sorted_lengths[hi]
        hi -= 1
        while len(row) < max_per_row and lo <= hi and used + sorted_lengths[lo] <= max_seq_length:
            row.append(order[lo])
            used += sorted_lengths[lo]
            lo += 1
        rows.append(sorted(row) + [-1] * (max_per_row - len(row)))
    table = np.array(rows, np.int64).reshape(-1, max_per_row)
    return table[np.argsort(table[:, 0], kind="stable")]


def packed_rows(ids: dict, lengths: np.ndarray, rows: np.ndarray) -> dict:
    """Examples' id rows -> packed rows holding the examples `rows` names, back to back from position 0.

    Args:
        ids: {"input_word_ids", "input_type_ids": [N, S]}: each example alone, its `lengths[i]` real tokens first.
        lengths: [N] int: each example's real tokens.
        rows: [R, K] int: each row's examples (pack_examples), then -1.

    Returns:
        {"input_word_ids", "input_mask", "input_type_ids", "position_ids", "packed_sequence_ids": [R, S] int32,
        "cls_positions": [R, K] int32 (0 for an empty slot)}.

    Example:
        >>> ids = {"input_word_ids": np.array([[101, 7, 102, 0, 0], [101, 102, 0, 0, 0]]),
        ...        "input_type_ids": np.zeros((2, 5), int)}
        >>> packed = packed_rows(ids, np.array([3, 2]), np.array([[0, 1]]))
        >>> packed["packed_sequence_ids"].tolist(), packed["position_ids"].tolist(), packed["cls_positions"].tolist()
        ([[1, 1, 1, 2, 2]], [[0, 1, 2, 0, 1]], [[0, 3]])
    """
    laid = lay_out_rows({name: ids[name] for name in ("input_word_ids", "input_type_ids")}, lengths, rows,
                        what="examples", limit="the sequence length")
    out = {name: laid[name].astype(np.int32) for name in ("input_word_ids", "input_type_ids", "position_ids",
                                                           "packed_sequence_ids", "cls_positions")}
    out["input_mask"] = laid["real"].astype(np.int32)
    return out


def example_ids(model, x, batch_size: int = 256, y=None) -> tuple:
    """Raw inputs -> ({"input_word_ids", "input_type_ids": [N, S] int32}, lengths [N]): each example alone, by
    the model's own preprocessor at its fixed seq_length (what unpacked training feeds). With `y` (a tagger's
    word labels), a third item: the piece labels [N, S] the unpacked training targets are (IGNORE where none)."""
    words, types, lengths, labels = [], [], [], []
    for batch in model.text_dataset(x, y, batch_size=batch_size, training=False):
        if y is not None:
            batch, targets = batch
            labels.append(targets.numpy())
        masks = batch["input_mask"].numpy()
        if not masks[:, :1].all() or (np.diff(masks, axis=1) > 0).any():
            raise ValueError("packing needs each example's tokens first, then padding")
        words.append(batch["input_word_ids"].numpy())
        types.append(batch["input_type_ids"].numpy())
        lengths.append(masks.sum(1))
    ids = {"input_word_ids": np.concatenate(words).astype(np.int32),
           "input_type_ids": np.concatenate(types).astype(np.int32)}
    if y is not None:
        return ids, np.concatenate(lengths).astype(np.int64), np.concatenate(labels).astype(np.int32)
    return ids, np.concatenate(lengths).astype(np.int64)


class PackedTraining:
    """The packed training input of a run: built once from the training examples (module docstring).

    Args:
        task: a finetune Task whose model is a BertClassifier (classification or regression) or a BertTagger.
        examples: the training examples (the task's reader's).
        model: the task model (its preprocessor has a fixed seq_length).
        batch_size: int. Examples per step (on average).
        seed: int. The run's seed: the examples' order before packing and the rows' order every epoch.
        max_per_row: int. K, examples a row holds at most.
        multiple: int. Rows per step are a multiple of it (the devices or replicas a batch is split over).

    Example:
        >>> packed = PackedTraining(task, train, model, batch_size=32, seed=0)            # doctest: +SKIP
        >>> packed.steps_per_epoch, packed.rows_per_step                                  # doctest: +SKIP
    """

    def __init__(self, task, examples: list, model, batch_size: int, seed: int,
                 max_per_row: int = DEFAULT_EXAMPLES_PER_ROW, multiple: int = 1):
        from bert_keras.tasks.tagger import IGNORE, BertTagger
        x, y = task.inputs(examples)
        order = np.random.default_rng(seed).permutation(len(examples))
        self.per_token = isinstance(model, BertTagger)          # targets [R, S] laid out as the tokens
        if self.per_token:
            ids, lengths, targets = example_ids(model, x, y=y)
        else:
            (ids, lengths), targets = example_ids(model, x), np.asarray(y)
        ids = {k: v[order] for k, v in ids.items()}
        lengths, targets = lengths[order], targets[order]
        seq = ids["input_word_ids"].shape[1]
        windows = [(i, pack_examples(lengths[i:i + WINDOW], seq, max_per_row))
                   for i in range(0, len(lengths), WINDOW)]
        rows = np.concatenate([np.where(r >= 0, r + i, -1) for i, r in windows])
        self.features = packed_rows(ids, lengths, rows)
        present = rows >= 0
        if self.per_token:
            laid = lay_out_rows({"targets": targets}, lengths, rows, what="examples", limit="the sequence length")
            self.targets = np.where(laid["real"], laid["targets"], IGNORE).astype(np.int32)      # [R, S]
            self.weights = None
            del self.features["cls_positions"]
        else:
            self.targets = np.where(present, targets[np.where(present, rows, 0)], 0).astype(targets.dtype)
            self.weights = present.astype(np.float32)
        self.examples, self.rows = len(examples), len(rows)
        self.examples_per_row = self.examples / self.rows
        self.rows_per_step = max(multiple, int(round(batch_size / self.examples_per_row / multiple)) * multiple)
        self.steps_per_epoch = self.rows // self.rows_per_step
        self.seed = seed

    @property
    def examples_per_epoch(self) -> int:
        """Examples trained on in one epoch (the rows of its whole steps, at the mean examples a row)."""
        return int(round(self.steps_per_epoch * self.rows_per_step * self.examples_per_row))

    def dataset(self, skip_batches: int = 0, shard: int = 0, shards: int = 1,
                rows: int | None = None) -> tf.data.Dataset:
        """Batches of (packed x, targets [B, K], weights [B, K]) (a tagger: (packed x, piece labels [B, S])), `rows`
        (default rows_per_step) rows each, every shape static, repeated; the rows reshuffled every epoch (seeded);
        rows shard, shard + shards, ... (one input pipeline of several); the first `skip_batches` skipped (a
        resumed run)."""
        parts = (self.features, self.targets) if self.weights is None else (self.features, self.targets, self.weights)
        ds = tf.data.Dataset.from_tensor_slices(parts).shard(shards, shard)
        ds = ds.shuffle(self.rows, seed=self.seed, reshuffle_each_iteration=True)
        ds = ds.batch(rows or self.rows_per_step, drop_remainder=True).repeat()
        return (ds.skip(skip_batches) if skip_batches else ds).prefetch(tf.data.AUTOTUNE)

    def input(self, strategy, skip_batches: int = 0):
        """The training input of a run under `strategy` (training/input_pipelines.py: one pipeline per host,
        rows_per_step rows a step over all replicas), after `skip_batches` steps."""
        from bert_keras.training.input_pipelines import distributed_input
        return distributed_input(strategy, lambda shard, shards, rows: self.dataset(skip_batches, shard, shards, rows),
                                 self.rows_per_step)

    def summary(self) -> dict:
        """What the run record says about the packing."""
        return {"examples": self.examples, "rows": self.rows, "examples_per_row": round(self.examples_per_row, 4),
                "rows_per_step": self.rows_per_step,
                "real_token_share": round(float(self.features["input_mask"].mean()), 4)}


def packed_training(task, examples: list, model, config, strategy) -> PackedTraining:
    """`finetune --pack`: the packed input of a run (FinetuneConfig `pack` = K), after checking it applies: a
    sentence classifier or regressor (not multi-label) or a token tagger, with a fixed sequence length. Prints one
    line saying what a step holds.

    Example:
        >>> packed = packed_training(task, train, model, config, strategy)                # doctest: +SKIP
    """
    from bert_keras.backends import distributed_devices, on_tensorflow
    from bert_keras.tasks import BertClassifier, BertTagger
    if not (isinstance(model, BertClassifier) and not model.multi_label) and not isinstance(model, BertTagger):
        raise ValueError(f"--pack trains sentence classification and regression (GLUE tasks, STS-B) and token "
                         f"tagging (CoNLL-2003), not {task.name}: leave --pack out")
    if model.preprocessor.seq_length is None:
        raise ValueError("--pack needs --seq-length: packed rows have one fixed length")
    multiple = distributed_devices() if not on_tensorflow() else strategy.num_replicas_in_sync
    packed = PackedTraining(task, examples, model, config.batch_size, config.seed, config.pack, multiple)
    print(f"packed {packed.examples:,} training examples into {packed.rows:,} rows of {model.preprocessor.seq_length} "
          f"tokens ({packed.examples_per_row:.2f} a row, at most {config.pack}); a step takes "
          f"{packed.rows_per_step} rows, about {packed.rows_per_step * packed.examples_per_row:.1f} examples",
          flush=True)
    return packed
