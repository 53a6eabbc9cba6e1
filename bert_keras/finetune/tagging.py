"""Token tagging (CoNLL-2003 NER): words in, one label per word; the label goes on the word's first WordPiece and
the other pieces are ignored (label -1), as in the BERT paper. Metric: seqeval-style entity F1 (IOB2).

A word whose text yields no WordPiece (control characters only) or that falls past the sequence length is
predicted "O", so predictions always align with the words.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_keras.data import CONLL2003_LABELS, read_conll2003
from bert_keras.finetune.base import Task, register
from bert_keras.metrics.tagging import precision_recall_f1
from bert_keras.tasks import BertTagger

IGNORE = -1


def tag_inputs(preprocessor, words, word_labels):
    """words: RaggedTensor [B, (words)] strings; word_labels: [B, (words)] int32.

    Returns (id dict [B, L], piece labels [B, L] with IGNORE off first pieces, piece word index [B, L]: the
    index of the word a first piece starts, IGNORE elsewhere).
    """
    flat = preprocessor.tokenize(words.flat_values)                       # [words, (pieces)]
    pieces = tf.RaggedTensor.from_row_splits(flat, words.row_splits)      # [B, (words), (pieces)]
    is_first = tf.RaggedTensor.from_row_splits(tf.equal(tf.ragged.range(flat.row_lengths()), 0), words.row_splits)
    word_index = tf.cast(tf.ragged.range(words.row_lengths()), tf.int32)  # [B, (words)]

    def per_piece(values):                                                # [B, (words)] -> [B, (pieces)]
        spread = tf.ones_like(pieces, tf.int32) * tf.expand_dims(values, -1)
        return tf.where(is_first, spread, IGNORE).merge_dims(1, 2)

    piece_labels, piece_words = per_piece(word_labels), per_piece(word_index)
    ids = pieces.merge_dims(1, 2)
    budget = (preprocessor.seq_length or preprocessor.max_seq_length) - 2
    ids, piece_labels, piece_words = ids[:, :budget], piece_labels[:, :budget], piece_words[:, :budget]
    x = preprocessor.pack([ids])
    length = tf.shape(x["input_word_ids"])[1]

    def align(values):                                                    # [CLS] values [SEP] pad, like the ids
        cls = tf.fill([values.nrows(), 1], IGNORE)
        return tf.concat([cls, values, cls], axis=1).to_tensor(IGNORE, shape=tf.shape(x["input_word_ids"]))

    return x, align(piece_labels), align(piece_words)


@register("conll2003", "ner", "tagging")
class TaggingTask(Task):
    metric_name = "f1"
    default_files = ("train.txt", "valid.txt")

    def __init__(self, name: str, labels=CONLL2003_LABELS):
        self.name, self.labels = name, list(labels)

    def read(self, path):
        return read_conll2003(path, self.labels)

    def build_model(self, encoder, examples):
        return BertTagger(encoder, num_labels=len(self.labels))

    def export_args(self):
        return {"labels": self.labels}

    def _batches(self, examples, preprocessor, batch_size, training, seed):
        words = tf.ragged.constant([list(e.tokens) for e in examples], tf.string)
        tags = tf.ragged.constant([[self.labels.index(t) for t in e.tags] for e in examples], tf.int32)
        ds = tf.data.Dataset.from_tensor_slices((words, tags))
        if training:
            ds = ds.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
        ds = ds.ragged_batch(batch_size, drop_remainder=training)
        return ds.map(lambda w, t: tag_inputs(preprocessor, w, t), num_parallel_calls=tf.data.AUTOTUNE)

    def dataset(self, examples, preprocessor, batch_size, training, seed=0):
        ds = self._batches(examples, preprocessor, batch_size, training, seed)
        return ds.map(lambda x, labels, _: (x, labels)).prefetch(tf.data.AUTOTUNE)

    def compile_args(self):
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE),
                "metrics": []}

    def predict_tags(self, model, examples, preprocessor, batch_size) -> list[list[str]]:
        """One label per word of each example."""
        predictions = []
        for x, _, word_index in self._batches(examples, preprocessor, batch_size, False, 0):
            best = np.asarray(model(x, training=False)).argmax(-1)
            word_index = word_index.numpy()
            for row_best, row_words in zip(best, word_index):
                predictions.append({w: self.labels[b] for w, b in zip(row_words, row_best) if w != IGNORE})
        return [[found.get(i, "O") for i in range(len(e.tokens))] for found, e in zip(predictions, examples)]

    def evaluate(self, model, examples, preprocessor, batch_size):
        predicted = self.predict_tags(model, examples, preprocessor, batch_size)
        p, r, f, _ = precision_recall_f1([list(e.tags) for e in examples], predicted)
        return {"f1": f, "precision": p, "recall": r}
