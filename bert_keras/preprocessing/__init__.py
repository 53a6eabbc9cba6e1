"""In-graph BERT preprocessing: normalise and split (normalize.py), WordPiece with offsets (wordpiece.py),
pack segments into model inputs (packer.py), the vocabulary (vocab.py), and the Keras layer that joins them."""

from bert_keras.preprocessing.preprocessor import BertPreprocessor  # noqa: E402
from bert_keras.preprocessing.vocab import build_vocab, load_vocab  # noqa: E402

__all__ = ["BertPreprocessor", "build_vocab", "load_vocab"]
