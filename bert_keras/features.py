"""Word features from a frozen BERT: the feature-based approach of the BERT paper (section 5.3, Table 7).

Every word of a text gets one vector read from chosen hidden states of the encoder, with no fine-tuning. The hidden
states are numbered as Hugging Face's `output_hidden_states`: 0 is the embedding layer's output (the LayerNorm'ed
sum of word, position and type embeddings: `encoder.embeddings(ids, type_ids)`), i = 1..L is block i's output
(`encoder(ids)["encoder_outputs"][i - 1]`); L is the last (`sequence_output`).

Layer choices (`layers=`), with L blocks (all-MiniLM-L6-v2: L = 6, H = 384):

    choice                   hidden states          features per word
    embeddings               0                      [H]
    last                     L                      [H]
    second_to_last           L - 1                  [H]
    sum_last_four            L - 3 .. L             [H]      the sum
    concat_last_four         L - 3 .. L             [4 H]    concatenated in that (ascending) order
    sum_all                  0 .. L                 [H]      the sum of the embeddings and every block
    weighted_sum_last_four   L - 3 .. L             [4, H]   the stack, for a learned mix (ScalarMix)
    weighted_sum_all         0 .. L                 [L + 1, H]
    an int k, or a list      k (negative: from the end), or each listed one   [H] or [n, H]

The two `weighted_sum_*` choices are ELMo's learned scalar mix, gamma * sum_j softmax(w)_j h_j: the weights are
trained with the model that reads the features, so extraction returns the stack of the states they mix and that
model starts with a `ScalarMix` layer (`ScalarMix()(features)` -> [..., H]). The "four" choices need L >= 4.

Words (`words=`) are those BERT's basic tokenizer makes from raw text (`BertPreprocessor.words`: whitespace and
punctuation splits, each CJK character alone; a "##" piece continues the word before it), or the words given when a
text is a list of words (each tokenized alone, CoNLL style: `bert_keras.tasks.tagger.tag_inputs`, the tagger's
alignment). A word's vector is its first piece's ("first", the BERT paper's NER recipe) or the mean of its pieces
("mean"). [CLS] and [SEP] are not words.

Long texts: the preprocessor keeps the first `max_seq_length - 2` pieces of a text (or `seq_length - 2`). A word
whose pieces do not all fit is dropped with the words after it: its text's row of `num_words` still counts it, the
result has no row for it, and a warning says how many words of how many texts were dropped. Split such texts
first (e.g. into sentences) to keep every word.
"""

from __future__ import annotations

import dataclasses
import warnings
import weakref

import keras
import numpy as np
from keras import ops

LAYER_CHOICES = ("embeddings", "last", "second_to_last", "sum_last_four", "concat_last_four", "sum_all",
                 "weighted_sum_last_four", "weighted_sum_all")
WORD_CHOICES = ("first", "mean")


def hidden_state_indices(layers, num_layers: int) -> list[int]:
    """The hidden states a layer choice reads, in order: 0 is the embedding output, i (1..L) block i's output.

    Args:
        layers: str, int or list of int. A name of `LAYER_CHOICES`, one hidden state (negative counts from the
            end: -1 is the last block), or a list of them (stacked).
        num_layers: int. L, the encoder's number of blocks.

    Returns:
        list of int, each in 0..L.

    Raises:
        ValueError: an unknown name, an index outside -(L + 1)..L, or a "four" choice with fewer than 4 blocks.

    Example:
        >>> bert_keras.features.hidden_state_indices("sum_last_four", 6)
        [3, 4, 5, 6]
        >>> indices = bert_keras.features.hidden_state_indices
        >>> indices("weighted_sum_all", 2), indices(-2, 6)
        ([0, 1, 2], [5])
    """
    last = num_layers
    if isinstance(layers, str):
        if layers not in LAYER_CHOICES:
            raise ValueError(f"unknown layer choice {layers!r}: choose one of {', '.join(LAYER_CHOICES)}, a hidden "
                             f"state index (0 = embeddings .. {last} = last layer) or a list of them")
        if layers.endswith("last_four") and num_layers < 4:
            raise ValueError(f"{layers!r} needs at least 4 layers; this encoder has {num_layers}: choose a list of "
                             f"hidden state indices (0 = embeddings .. {last}) instead")
        return {"embeddings": [0], "last": [last], "second_to_last": [last - 1],
                "sum_all": list(range(last + 1)), "weighted_sum_all": list(range(last + 1))}.get(
                    layers, list(range(last - 3, last + 1)))
    many = isinstance(layers, (list, tuple, np.ndarray))
    indices = list(layers) if many else [layers]
    if not indices or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in indices):
        raise ValueError(f"layers must be one of {', '.join(LAYER_CHOICES)}, an int or a list of ints, got {layers!r}")
    for i in indices:
        if not -(last + 1) <= i <= last:
            raise ValueError(f"hidden state {i} does not exist: this encoder has {last + 1} (0 = embeddings .. "
                             f"{last} = last layer; -1 = last)")
    return [int(i) % (last + 1) for i in indices]


def combine_hidden_states(states, layers):
    """Combines the hidden states a choice reads into its features.

    Args:
        states: array [..., n, H]: the n hidden states `hidden_state_indices(layers, L)` names, in that order.
        layers: str, int or list of int. The choice (see the module docstring).

    Returns:
        array: [..., H] for a single state and the sums, [..., 4 H] for "concat_last_four", and `states` itself
        ([..., n, H]) for the weighted sums and lists (the stack a `ScalarMix` learns to mix).

    Example:
        >>> states = np.ones([5, 4, 8], "float32")                   # 5 words, the last four of L states, H = 8
        >>> [bert_keras.features.combine_hidden_states(states, c).shape for c in ("sum_last_four",
        ...                                                                       "concat_last_four")]
        [(5, 8), (5, 32)]
    """
    states = np.asarray(states)
    if layers in ("sum_last_four", "sum_all"):
        return states.sum(axis=-2, dtype=np.float32)
    if layers == "concat_last_four":
        return states.reshape(*states.shape[:-2], states.shape[-2] * states.shape[-1])
    if isinstance(layers, (list, tuple, np.ndarray)) or (isinstance(layers, str) and layers.startswith("weighted")):
        return states
    return states[..., 0, :]                           # one hidden state


@keras.saving.register_keras_serializable(package="bert_keras")
class ScalarMix(keras.layers.Layer):
    """ELMo's learned scalar mix of layers: gamma * sum_j softmax(w)_j h_j, for the `weighted_sum_*` features.

    The mixing logits w start at 0 (an even mix) and the scale gamma at 1; both train with the model this layer
    starts. Use it on the stack `word_features(..., layers="weighted_sum_all")` returns.

    Args:
        trainable_scale: bool. Whether gamma trains (ELMo's task-specific scale); False keeps it at 1.
        **kwargs: Keras layer arguments (name, dtype, ...).

    Call arguments:
        inputs: [..., n, H] the stacked hidden states.

    Returns:
        [..., H] their mix.

    Example:
        >>> mix = bert_keras.features.ScalarMix()
        >>> stack = np.stack([np.zeros([2, 8]), np.ones([2, 8])], axis=1).astype("float32")   # [2 words, 2, 8]
        >>> np.asarray(mix(stack))[0, :3]                                                  # the even mix at start
        array([0.5, 0.5, 0.5], dtype=float32)
        >>> [tuple(w.shape) for w in mix.trainable_weights]
        [(2,), ()]
    """

    def __init__(self, *, trainable_scale: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.trainable_scale = trainable_scale

    def build(self, input_shape):
        self.mix_logits = self.add_weight(shape=(input_shape[-2],), initializer="zeros", name="mix_logits")
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale", trainable=self.trainable_scale)

    def call(self, inputs):
        weights = ops.softmax(ops.cast(self.mix_logits, inputs.dtype))
        return ops.cast(self.scale, inputs.dtype) * ops.sum(inputs * weights[:, None], axis=-2)

    def mix_weights(self):
        """The softmax-normalised weights [n] as NumPy."""
        return ops.convert_to_numpy(ops.softmax(self.mix_logits))

    def get_config(self):
        return {**super().get_config(), "trainable_scale": self.trainable_scale}


@dataclasses.dataclass
class WordFeatures:
    """The result of `word_features`: one row per kept word of every text, in text then word order.

    Attributes:
        features: float32 [W, width] (or [W, n, H] for the weighted sums and lists of hidden states).
        text_index: int32 [W]. The text each row belongs to.
        word_index: int32 [W]. The word's position among its text's words (0-based).
        start, end: int64 [W]. The word's [start, end) in bytes of its text's UTF-8; -1 for pre-split words.
        words: list of W str. Each word's text.
        num_words: int32 [T]. Words in each text, dropped ones (past the length limit) included.
        hidden_states: list of int. The hidden states read (0 = embeddings, i = block i).
        layers, words_mode: the choices made.
    """

    features: np.ndarray
    text_index: np.ndarray
    word_index: np.ndarray
    start: np.ndarray
    end: np.ndarray
    words: list
    num_words: np.ndarray
    hidden_states: list
    layers: object
    words_mode: str

    @property
    def dropped(self) -> np.ndarray:
        """int [T]: words of each text dropped because the text was longer than the preprocessor keeps."""
        return self.num_words - np.bincount(self.text_index, minlength=len(self.num_words))

    def per_text(self) -> list:
        """The features split by text: a list of T arrays [words of the text, ...]."""
        if not len(self.num_words):
            return []
        splits = np.cumsum(np.bincount(self.text_index, minlength=len(self.num_words)))[:-1]
        return np.split(self.features, splits)


def word_features(encoder, preprocessor, texts, layers="second_to_last", words: str = "first",
                  batch_size: int = 32) -> WordFeatures:
    """Contextual word features from chosen layers of a frozen encoder (BERT paper, Table 7).

    Texts are tokenized, sorted by length and run in batches (inference: no dropout); each word gets the chosen
    combination of hidden states at its first piece or averaged over its pieces (see the module docstring for
    the choices, the words and long texts).

    Args:
        encoder: BertEncoder. Its weights are not changed.
        preprocessor: BertPreprocessor. Its vocabulary and casing must match the encoder's (`load_backbone`).
        texts: list of str (raw texts; words are the basic tokenizer's), or list of lists of str (texts as
            words, each tokenized alone, as CoNLL data and the tagger).
        layers: str, int or list of int. One of `LAYER_CHOICES`, a hidden state index (0 = embeddings,
            -1 = last) or a list of them (stacked).
        words: str. "first" (the first piece's vector) or "mean" (the mean over the word's pieces).
        batch_size: int. Texts per encoder call.

    Returns:
        WordFeatures: `features` float32 [W, width] ([W, n, H] for the weighted sums and lists), with
        `text_index`, `word_index`, byte offsets `start`/`end` and the `words` of each row; `per_text()` splits
        the rows by text.

    Raises:
        ValueError: an unknown choice, a "four" choice with fewer than 4 layers, `texts` a single string, or a
            preprocessor packing longer sequences than the encoder's position table.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> preprocessor = bert_keras.BertPreprocessor("vocab.txt")
        >>> out = bert_keras.features.word_features(encoder, preprocessor, ["Paris is lovely.", "Hi"],
        ...                                         layers="sum_all", words="mean")
        >>> out.features.shape, out.words, out.text_index.tolist()
        ((5, 128), ['Paris', 'is', 'lovely', '.', 'Hi'], [0, 0, 0, 0, 1])
        >>> out.start.tolist(), out.end.tolist()                      # bytes of each text
        ([0, 6, 9, 15, 0], [5, 8, 15, 16, 2])
        >>> bert_keras.features.word_features(encoder, preprocessor, [["New", "York"]], layers=-1).features.shape
        (2, 128)
    """
    import tensorflow as tf

    if words not in WORD_CHOICES:
        raise ValueError(f"unknown word alignment {words!r}: choose one of {', '.join(WORD_CHOICES)}")
    if isinstance(texts, (str, bytes)):
        raise ValueError("texts must be a list of texts (or of word lists), not one string: wrap it in a list")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    num_layers = encoder.config.num_hidden_layers
    indices = hidden_state_indices(layers, num_layers)
    length = preprocessor.seq_length or preprocessor.max_seq_length
    if length > encoder.config.max_position_embeddings:
        raise ValueError(f"the preprocessor packs up to {length} tokens but the encoder has "
                         f"{encoder.config.max_position_embeddings} positions: give it max_seq_length="
                         f"{encoder.config.max_position_embeddings}")
    texts = list(texts)
    split = bool(texts) and all(isinstance(t, (list, tuple)) for t in texts)
    if not split and not all(isinstance(t, (str, bytes)) for t in texts):
        raise ValueError("texts must be all strings (raw texts) or all lists of strings (texts as words)")
    pieces, word_lengths, offsets, word_texts = _tokenize(preprocessor, texts, split)
    budget = length - 2
    order = np.argsort([len(p) for p in pieces], kind="stable")
    run = _state_function(encoder)
    rows = []                                               # per batch: (features, text, word, start, end)
    for at in range(0, len(order), batch_size):
        batch = order[at:at + batch_size]
        if split:
            from bert_keras.tasks.tagger import tag_inputs
            flat = [w for b in batch for w in texts[b]]
            ragged = tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.string, shape=[len(flat)]),
                                                      tf.constant([len(texts[b]) for b in batch], tf.int64))
            x = tag_inputs(preprocessor, ragged)[0]
        else:
            values = np.concatenate([pieces[b] for b in batch]).astype(np.int32)
            x = preprocessor.pack([tf.RaggedTensor.from_row_lengths(
                values, np.array([len(pieces[b]) for b in batch], np.int64))])
        x = {k: np.asarray(v, np.int32) for k, v in x.items()}
        # The kept words: all their pieces inside the budget; pieces at 1 + (pieces before the word) on.
        rows_b, firsts, counts, text_ids, word_ids = [], [], [], [], []
        for r, b in enumerate(batch):
            n = word_lengths[b]
            before = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
            keep = np.flatnonzero((n > 0) & (before + n <= budget))
            rows_b.append(np.full(len(keep), r))
            firsts.append(1 + before[keep])
            counts.append(n[keep])
            text_ids.append(np.full(len(keep), b))
            word_ids.append(keep)
        rows_b, firsts, counts = (np.concatenate(v).astype(np.int64) for v in (rows_b, firsts, counts))
        text_ids, word_ids = np.concatenate(text_ids), np.concatenate(word_ids)
        states = _hidden_states(run, x, indices)                                 # n arrays [B, S, H]
        if words == "first":
            per_word = [s[rows_b, firsts] for s in states]
        else:
            piece_rows = np.repeat(rows_b, counts)
            starts_at = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            piece_pos = np.repeat(firsts, counts) + np.arange(counts.sum()) - np.repeat(starts_at, counts)
            per_word = [np.add.reduceat(s[piece_rows, piece_pos], starts_at, axis=0) / counts[:, None]
                        if len(counts) else s[:0, 0] for s in states]
        stacked = np.stack(per_word, axis=1).astype(np.float32)          # [w, n, H]
        rows.append((combine_hidden_states(stacked, layers), text_ids, word_ids))
    num_words = np.array([len(n) for n in word_lengths], np.int32)
    width = combine_hidden_states(np.zeros([0, len(indices), encoder.config.hidden_size], np.float32), layers)
    features = np.concatenate([r[0] for r in rows] + [width]).astype(np.float32)
    text_index = np.concatenate([r[1] for r in rows] + [np.zeros([0], np.int64)]).astype(np.int32)
    word_index = np.concatenate([r[2] for r in rows] + [np.zeros([0], np.int64)]).astype(np.int32)
    sort = np.lexsort((word_index, text_index))
    features, text_index, word_index = features[sort], text_index[sort], word_index[sort]
    start = np.array([offsets[t][0][w] for t, w in zip(text_index, word_index)], np.int64).reshape(-1)
    end = np.array([offsets[t][1][w] for t, w in zip(text_index, word_index)], np.int64).reshape(-1)
    result = WordFeatures(features=features, text_index=text_index, word_index=word_index, start=start, end=end,
                          words=[word_texts[t][w] for t, w in zip(text_index, word_index)], num_words=num_words,
                          hidden_states=indices, layers=layers, words_mode=words)
    dropped = result.dropped
    if dropped.any():
        warnings.warn(f"{int(dropped.sum())} words of {int((dropped > 0).sum())} texts were dropped: those texts "
                      f"have more than {budget} word pieces (the preprocessor's max_seq_length - 2); split them "
                      f"to keep every word", stacklevel=2)
    return result


def _tokenize(preprocessor, texts, split: bool, chunk: int = 1024):
    """Per text: piece ids [P], pieces per word [words], (starts, ends) bytes per word, and the word strings."""
    import tensorflow as tf

    pieces, word_lengths, offsets, word_texts = [], [], [], []
    for at in range(0, len(texts), chunk):
        part = texts[at:at + chunk]
        if split:
            flat = [w for t in part for w in t]
            tokens = preprocessor.tokenize(tf.constant(flat, tf.string, shape=[len(flat)]))
            lengths = tokens.row_lengths().numpy()
            ids = tokens.flat_values.numpy()
            word_splits = np.concatenate([[0], np.cumsum([len(t) for t in part])])
            piece_splits = np.concatenate([[0], np.cumsum(lengths)])
            for i, t in enumerate(part):
                w0, w1 = word_splits[i], word_splits[i + 1]
                pieces.append(ids[piece_splits[w0]:piece_splits[w1]])
                word_lengths.append(lengths[w0:w1].astype(np.int64))
                offsets.append((np.full(len(t), -1), np.full(len(t), -1)))
                word_texts.append([w.decode("utf-8", "replace") if isinstance(w, bytes) else w for w in t])
        else:
            encoded = [t.encode("utf-8") if isinstance(t, str) else t for t in part]
            ids, starts, ends = preprocessor.tokenize_with_offsets(tf.constant(encoded, tf.string,
                                                                               shape=[len(encoded)]))
            nested = preprocessor.words(ids)                               # [T, (words), (pieces)]
            text_words = nested.row_splits.numpy()                         # [T + 1] over words
            word_pieces = nested.values.row_splits.numpy()                 # [W + 1] over pieces
            flat_ids, flat_starts, flat_ends = (v.flat_values.numpy() for v in (ids, starts, ends))
            for i, text in enumerate(encoded):
                w = word_pieces[text_words[i]:text_words[i + 1] + 1]       # this text's word splits
                pieces.append(flat_ids[w[0]:w[-1]])
                word_lengths.append(np.diff(w).astype(np.int64))
                s, e = flat_starts[w[:-1]], flat_ends[w[1:] - 1]
                offsets.append((s, e))
                word_texts.append([text[a:b].decode("utf-8", "replace") for a, b in zip(s, e)])
    return pieces, word_lengths, offsets, word_texts


_STATE_FUNCTIONS = weakref.WeakKeyDictionary()          # encoder -> its tf.function, traced once


def _state_function(encoder):
    """id dict -> every hidden state, L + 1 of [B, S, H] (inference). On TensorFlow one tf.function per encoder for
    every batch shape (4x faster than eager calls on CPU; traced once); on other backends the eager calls."""
    ref = weakref.ref(encoder)                   # the cached function must not keep its encoder alive

    def states(x):
        model = ref()
        blocks = model(x, training=False)["encoder_outputs"]
        return [model.embeddings(x["input_word_ids"], x["input_type_ids"], training=False), *blocks]

    from bert_keras.backends import on_tensorflow
    from bert_keras.encoder import INPUT_NAMES
    if not on_tensorflow():
        return states
    if encoder not in _STATE_FUNCTIONS:
        import tensorflow as tf
        spec = {name: tf.TensorSpec([None, None], tf.int32) for name in INPUT_NAMES}
        _STATE_FUNCTIONS[encoder] = tf.function(states, input_signature=[spec], autograph=False)
    return _STATE_FUNCTIONS[encoder]


def _hidden_states(run, x, indices) -> list:
    """The states `indices` names of those `run` (from _state_function) gives for the id dict x, as NumPy
    [B, S, H] float32."""
    states = run(x)
    return [ops.convert_to_numpy(states[i]).astype(np.float32) for i in indices]
