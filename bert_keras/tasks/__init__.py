"""Task models: a head on a BertEncoder, over the id dict (raw text goes through BertPreprocessor first)."""

from bert_keras.tasks.classifier import BertClassifier
from bert_keras.tasks.multiple_choice import BertMultipleChoice
from bert_keras.tasks.pretrainer import BertPretrainer, pretraining_loss
from bert_keras.tasks.span import BertSpanLabeler
from bert_keras.tasks.tagger import BertTagger

__all__ = ["BertClassifier", "BertMultipleChoice", "BertPretrainer", "BertSpanLabeler", "BertTagger", "pretraining_loss"]
