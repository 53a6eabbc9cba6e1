"""In-graph BERT preprocessing: normalise and split (normalize.py), WordPiece with offsets (wordpiece.py),
pack segments into model inputs (packer.py), the vocabulary (vocab.py), and the Keras layer that joins them."""
