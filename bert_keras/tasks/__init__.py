"""Task models: a head on a BertEncoder over the id dict, owning the BertPreprocessor that turns raw text into it."""

from bert_keras.tasks.classifier import BertClassifier
from bert_keras.tasks.embedder import BertEmbedder
from bert_keras.tasks.huggingface import from_huggingface, save_huggingface
from bert_keras.tasks.load import load_task_model
from bert_keras.tasks.masked_lm import BertMaskedLM, load_masked_lm
from bert_keras.tasks.multiple_choice import BertMultipleChoice
from bert_keras.tasks.pretrainer import BertPretrainer, pretraining_loss
from bert_keras.tasks.reranker import BertReranker
from bert_keras.tasks.span import BertSpanLabeler
from bert_keras.tasks.tagger import BertTagger

__all__ = ["BertClassifier", "BertEmbedder", "BertMaskedLM", "BertMultipleChoice", "BertPretrainer", "BertReranker",
           "BertSpanLabeler", "BertTagger", "from_huggingface", "load_masked_lm", "load_task_model", "pretraining_loss", "save_huggingface"]
