"""In-graph BERT preprocessing: normalise and split (normalize.py), WordPiece with offsets (wordpiece.py),
pack segments into model inputs (packer.py), the vocabulary (vocab.py), and the Keras layer that joins them
(preprocessor.py). The TF Serving op check is savedmodels/ops.py."""

from bert_keras.preprocessing.packer import pack_segments
from bert_keras.preprocessing.preprocessor import BertPreprocessor
from bert_keras.preprocessing.vocab import build_vocab, check_casing, load_vocab
from bert_keras.preprocessing.wordpiece import WordpieceTokenizer

__all__ = ["BertPreprocessor", "WordpieceTokenizer", "build_vocab", "check_casing", "load_vocab", "pack_segments"]
