"""BertPreprocessor: raw text in, the encoder's id dict out. One Keras layer for every place text enters a model.

It runs inside `tf.data` (on the host, when the model trains on a TPU, where string ops cannot run) and inside
every exported SavedModel, so training and serving tokenize with the same code. The vocabulary is part of the
layer's config: a `.keras` file or SavedModel needs no vocab.txt beside it.

Call: text [B] string (a Python list of strings is a batch too), or a tuple/list of segments, each a [B] tensor
or array: (question, context), (sentence_a, sentence_b).
Segments of shape [B, C] (C choices: (context [B, C], ending [B, C])) give [B, C, L] outputs.
Returns {"input_word_ids", "input_mask", "input_type_ids"}: int32 [B, L] (see packer.py for L).
Invalid UTF-8 never fails: each invalid byte reads as U+FFFD, which BERT's clean-up drops (so "caf\xffe" gives
the ids of "cafe", as HF gives for the text decoded with errors="replace"), and offsets still index the
original bytes.
Exports: the layer holds no lookup tables (FastWordpiece's model is a graph constant), so
`keras.export.ExportArchive().track(layer)` or `tf.saved_model.save` need nothing else, and the graph uses only
op types of TF core and TF.Text 2.12.1 (ops.py checks), which every stock TF Serving from 2.12 links.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_keras.preprocessing.packer import TRUNCATIONS, pack_segments
from bert_keras.preprocessing.vocab import check_casing, load_vocab, vocab_is_cased
from bert_keras.preprocessing.wordpiece import WordpieceTokenizer


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPreprocessor(keras.layers.Layer):
    """Raw text in, the encoder's id dict out: BERT's tokenizer and input packing as one in-graph Keras layer.

    Normalises and splits as google-research/bert's BasicTokenizer, runs WordPiece (TF.Text's FastWordpiece)
    and packs segments as `[CLS] a [SEP] b [SEP]`, all TensorFlow ops: the same layer runs in `tf.data` (on the
    host when a TPU trains), inside task models and in every exported SavedModel, so training and serving
    tokenize alike. The vocabulary is part of the config, so a `.keras` file or export needs no vocab.txt.
    Options after `vocab` are keyword-only (`seq_length` and `max_seq_length` are both ints).

    Args:
        vocab: str or list of str. A `vocab.txt` path, or the tokens in id order.
        lower_case: bool or None. Lower-case and strip accents first (uncased models). None reads it from the
            vocabulary (an uncased one has no capital letters). A mismatch with the vocabulary raises.
        seq_length: int or None. Pad and truncate every batch to this length (static shapes, what a TPU
            needs); None pads to the batch's longest sequence rounded up to a multiple of 8.
        max_seq_length: int. Upper bound on the length when `seq_length` is None (the encoder's position
            table limits it: 512 for released BERTs).
        truncation: str. "round_robin" (one token per segment in turn, TF.Text's) or "longest_first"
            (google-research's `_truncate_seq_pair`); both give the same lengths.
        **kwargs: Keras layer arguments (name, ...).

    Call arguments:
        inputs: text [B] string (tensor, array or Python list), or a tuple of segments, each [B], e.g.
            (sentence_a, sentence_b) or (question, context). Segments of shape [B, C] give [B, C, L] outputs.

    Returns:
        dict of [B, L] int32: "input_word_ids", "input_mask" (1 for tokens), "input_type_ids" (segment index).

    Raises:
        ValueError: `lower_case` contradicts the vocabulary, `truncation` is unknown, or `seq_length` is not
            within [3, max_seq_length].

    Example:
        >>> preprocessor = bert_keras.BertPreprocessor("vocab.txt", seq_length=8)
        >>> x = preprocessor(["The movie was great!"])
        >>> x["input_word_ids"].numpy()
        array([[ 101, 1996, 3185, 2001, 2307,  999,  102,    0]], dtype=int32)
        >>> x = preprocessor((["Is it good?"], ["Yes, very."]))      # 4 + 4 tokens, cut to fit 8 in turn
        >>> x["input_word_ids"].numpy()
        array([[ 101, 2003, 2009, 2204,  102, 2748, 1010,  102]], dtype=int32)
        >>> x["input_type_ids"].numpy()
        array([[0, 0, 0, 0, 0, 1, 1, 1]], dtype=int32)
    """

    def __init__(self, vocab, *, lower_case: bool | None = True, seq_length: int | None = None,
                 max_seq_length: int = 512, truncation: str = "round_robin", **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self._convert_input_args = False            # strings pass through untouched
        self._allow_non_tensor_positional_args = True
        # A plain attribute: Keras would wrap the list and track each of its ~30k strings, for every layer built.
        object.__setattr__(self, "vocab", load_vocab(vocab))
        if lower_case is None:                       # read from the vocabulary: uncased ones have no capitals
            lower_case = not vocab_is_cased(self.vocab)
        check_casing(self.vocab, lower_case)
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        if seq_length is not None and not 3 <= seq_length <= max_seq_length:
            raise ValueError(f"seq_length must be between 3 and max_seq_length ({max_seq_length}), got {seq_length}")
        self.lower_case, self.seq_length = lower_case, seq_length
        self.max_seq_length, self.truncation = max_seq_length, truncation
        self.tokenizer = WordpieceTokenizer(self.vocab, lower_case)
        self.cls_id, self.sep_id = self.vocab.index("[CLS]"), self.vocab.index("[SEP]")
        self.pad_id = self.vocab.index("[PAD]")
        self.built = True                            # no weights: ready for ExportArchive.track before a call

    # Graph-safe Python (no tensor-dependent control flow): tf.data's map would otherwise have autograph rewrite
    # this module and TF.Text's, seconds per map.
    @tf.autograph.experimental.do_not_convert
    def tokenize(self, text):
        """[B] strings -> RaggedTensor [B, (tokens)] int32 ids."""
        return self.tokenizer.tokenize(text)

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, text):
        """[B] strings -> (ids, starts, ends), RaggedTensors [B, (tokens)]: [start, end) bytes of the original."""
        return self.tokenizer.tokenize_with_offsets(text)

    @tf.autograph.experimental.do_not_convert
    def words(self, ids):
        """RaggedTensor [B, (pieces)] from `tokenize` -> [B, (words), (pieces)], the words BERT's basic tokenizer
        made (whitespace and punctuation splits, each CJK character alone): a piece whose vocabulary entry starts
        with "##" continues the word before it, any other piece starts a word. WordPiece gives "##" pieces only
        after a word's first piece, and no word begins with "##" ("#" is punctuation, a word of its own; an
        unknown word is one [UNK]), so every row starts with a word and the nesting is exact. (TF Hub's tokenize
        shape; the tagger's entities are spans of these words.)"""
        continues = tf.constant([token.startswith("##") for token in self.vocab])
        pieces, row_splits = ids.flat_values, ids.row_splits
        starts = tf.logical_not(tf.gather(continues, pieces))                                    # [P]
        word_splits = tf.concat([tf.reshape(tf.where(starts), [-1]), tf.size(pieces, out_type=tf.int64)[None]], 0)
        words_before = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(tf.cast(starts, tf.int64))], 0)   # [P + 1]
        return tf.RaggedTensor.from_nested_row_splits(pieces, [tf.gather(words_before, row_splits), word_splits],
                                                      validate=False)

    @tf.autograph.experimental.do_not_convert
    def pack(self, segments) -> dict:
        """Token-id segments (RaggedTensors [B, (tokens)]) -> the id dict, with this layer's length rules."""
        return pack_segments(list(segments), self.cls_id, self.sep_id, self.seq_length, self.max_seq_length,
                             self.truncation, self.pad_id)

    @tf.autograph.experimental.do_not_convert
    def call(self, inputs):
        is_segments = isinstance(inputs, (tuple, list)) and not all(isinstance(x, (str, bytes)) for x in inputs)
        segments = [tf.convert_to_tensor(s, dtype=tf.string) for s in (inputs if is_segments else [inputs])]
        rank, outer = segments[0].shape.rank, tf.shape(segments[0])
        # A scalar becomes a batch of one; [B, C] choices become B*C sequences, reshaped back at the end.
        packed = self.pack([self.tokenize(tf.reshape(s, [-1])) for s in segments])
        if rank == 2:
            return {k: tf.reshape(v, tf.concat([outer, [-1]], 0)) for k, v in packed.items()}
        return packed

    def get_config(self):
        return {**super().get_config(), "vocab": self.vocab, "lower_case": self.lower_case,
                "seq_length": self.seq_length, "max_seq_length": self.max_seq_length,
                "truncation": self.truncation}

