"""Token tagging (CoNLL-2003 NER): words in, one label per word (BertTagger: the label goes on the word's first
WordPiece). Metric: seqeval-style entity F1 (IOB2)."""

from __future__ import annotations

import keras

from bert_keras.data import CONLL2003_LABELS, read_conll2003
from bert_keras.finetune.base import Task, some_examples
from bert_keras.metrics.tagging import precision_recall_f1
from bert_keras.tasks import BertTagger
from bert_keras.tasks.tagger import IGNORE


class TaggingTask(Task):
    """CoNLL-2003 named entities: a BertTagger over IOB2 labels, seqeval's entity F1."""

    metric_name = "f1"
    default_files = ("train.txt", "valid.txt")
    uses_pooler = False

    def __init__(self, name: str, labels=CONLL2003_LABELS):
        self.name, self.labels = name, list(labels)

    def read(self, path):
        return some_examples(read_conll2003(path, self.labels), path, "no sentences, only -DOCSTART- and blank lines")

    def build_model(self, encoder, preprocessor, examples):
        return BertTagger(encoder, label_names=self.labels, preprocessor=preprocessor)

    def inputs(self, examples):
        return [list(e.tokens) for e in examples], [[self.labels.index(t) for t in e.tags] for e in examples]

    def compile_args(self):
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE),
                "metrics": []}

    def evaluate(self, model, examples, batch_size):
        predicted = model.tag_words([list(e.tokens) for e in examples], batch_size)
        p, r, f, _ = precision_recall_f1([list(e.tags) for e in examples], predicted)
        return {"f1": f, "precision": p, "recall": r}
