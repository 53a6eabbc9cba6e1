"""Token tagging (CoNLL-2003 NER): dropout + dense on every token's vector; labels go on each word's first
WordPiece and the other pieces are ignored in loss and evaluation (the BERT paper's recipe).

Inputs: the id dict ([B, S]). Output: logits [B, S, num_labels] float32.
Raw text: words (RaggedTensor or lists [B, (words)]) with targets one label id (or name) per word; or
sentences [B] to predict. `entities()` reads IOB2 labels as spans (start, end, type, text) of the sentence.
A word whose text yields no WordPiece, or (pre-split words) past the sequence length, is predicted "O".
`entities()` and `serve` (the export) label a text of any length: one longer than the sequence length is cut into
SQuAD's doc-stride windows (preprocessing/windows.py) and each piece takes its label from the window where it has
the most context (run_squad.py's max-context rule), so an entity across a window edge comes out whole.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_keras.data.conll import CONLL2003_LABELS
from bert_keras.encoder import INPUT_NAMES, PACKED_INPUT_NAMES, is_packed
from bert_keras.preprocessing.offsets import row_char_offsets
from bert_keras.preprocessing.ragged_rows import position_in_row, row_ids, splits_from_lengths, upper_bound
from bert_keras.preprocessing.windows import squad_windows
from bert_keras.tasks.base import TaskModel, dense_head, id_inputs

IGNORE = -1


def tag_inputs(preprocessor, words, word_labels=None):
    """words: RaggedTensor [B, (words)] strings; word_labels: [B, (words)] int32 or None.

    Returns (id dict [B, L], piece labels [B, L] with IGNORE off first pieces, piece word index [B, L]: the
    index of the word a first piece starts, IGNORE elsewhere).

    Flat tensors and raw ops throughout: RaggedTensor helpers (ragged tf.where, merge_dims, slicing, concat) add
    ~800 assertion and control-flow nodes, and tf.data optimises a map's graph again for every iterator, so
    with them each epoch of NER fine-tuning started with ~4 s of graph optimisation (2 cores).
    """
    flat = preprocessor.tokenize(words.flat_values)                       # [W, (pieces)]
    pieces, piece_splits_by_word = flat.flat_values, flat.row_splits
    num_pieces = tf.size(pieces, out_type=tf.int64)
    word_splits = tf.cast(words.row_splits, tf.int64)                     # [B + 1]
    num_words = word_splits[-1]
    piece_word = row_ids(piece_splits_by_word, num_pieces)                # [P] the word of each piece
    is_first = tf.equal(tf.range(num_pieces), tf.gather(piece_splits_by_word, piece_word))
    word_index = position_in_row(word_splits)                             # [W]
    labels = (tf.zeros([num_words], tf.int32) if word_labels is None else
              tf.reshape(tf.cast(word_labels.flat_values if isinstance(word_labels, tf.RaggedTensor)
                                 else word_labels, tf.int32), [-1]))

    def per_piece(values):                                                # [W] -> [P], IGNORE off first pieces
        return tf.where(is_first, tf.gather(tf.cast(values, tf.int32), piece_word), IGNORE)

    # Each sentence keeps its first `budget` pieces (room for [CLS] and [SEP]).
    splits = tf.gather(piece_splits_by_word, word_splits)                 # [B + 1] pieces per sentence
    position = position_in_row(splits, num_pieces)
    budget = (preprocessor.seq_length or preprocessor.max_seq_length) - 2
    keep = position < budget
    kept_splits = splits_from_lengths(tf.minimum(splits[1:] - splits[:-1], budget))
    ragged = lambda values: tf.RaggedTensor.from_row_splits(tf.boolean_mask(values, keep), kept_splits,  # noqa: E731
                                                            validate=False)
    x = preprocessor.pack([ragged(pieces)])
    shape = tf.shape(x["input_word_ids"], out_type=tf.int64)

    def align(values):                                                    # [CLS] values [SEP] pad, like the ids
        dense = ragged(values).to_tensor(IGNORE, shape=[shape[0], shape[1] - 1])
        return tf.concat([tf.fill([shape[0], 1], IGNORE), dense], axis=1)

    return x, align(per_piece(labels)), align(per_piece(word_index))


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTagger(TaskModel):
    """Token tagging (named entities, CoNLL-2003): one label per word, read from its first WordPiece.

    Dropout and one dense layer on every token's vector. Words' labels go on their first piece; the other
    pieces are ignored in the loss and evaluation (the BERT paper's recipe). A word that yields no piece is
    predicted "O", and so is one of `tag_words` past the sequence length. `entities` and the export's `serve`
    read IOB2 labels as character spans of the text, in-graph, and label a text of any length: a longer one is
    cut into doc-stride windows, each piece labelled in the window where it has the most context (SQuAD's rules).
    Arguments after `num_labels` are keyword-only.

    Args:
        encoder: BertEncoder. The backbone.
        num_labels: int or None. K, the number of labels; None takes it from `label_names` (default: the 9
            CoNLL-2003 IOB2 labels).
        dropout: float. Dropout rate on the token vectors before the head.
        label_names: list of K str, or None. IOB2 names ("O", "B-PER", "I-PER", ...), in logit order.
        preprocessor: BertPreprocessor or None. Needed for raw text.
        doc_stride: int or None. Pieces between the starts of consecutive windows over a text longer than the
            sequence length (`entities`, `serve`); None: half a window.
        name: str or None. The Keras model name.

    Inputs and outputs:
        The id dict, each [B, S] int32 -> logits [B, S, K] float32.
        Raw text: words [B, (words)] (lists or a RaggedTensor) with one label id or name per word as targets;
        or sentences [B] to predict.

    Raises:
        ValueError: `label_names` does not have `num_labels` entries, or `doc_stride` is not a positive int.

    Example:
        >>> model = bert_keras.tasks.BertTagger(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")),
        ...     preprocessor=bert_keras.BertPreprocessor("vocab.txt", lower_case=True))
        >>> model.label_names[:3]
        ['O', 'B-PER', 'I-PER']
        >>> labels = model.tag_words([["Ada", "Lovelace", "wrote", "it"]])
        >>> len(labels[0]), all(label in model.label_names for label in labels[0])
        (4, True)
        >>> type(model.entities(["Ada Lovelace wrote it."])[0])
        <class 'list'>
    """

    def __init__(self, encoder, num_labels: int | None = None, *, dropout: float = 0.1, label_names=None,
                 preprocessor=None, doc_stride: int | None = None, name=None):
        label_names = list(label_names or (CONLL2003_LABELS if num_labels in (None, len(CONLL2003_LABELS))
                                           else [str(i) for i in range(num_labels)]))
        num_labels = num_labels or len(label_names)
        if len(label_names) != num_labels:
            raise ValueError(f"{len(label_names)} label_names for {num_labels} labels: give one name per label")
        if doc_stride is not None and (isinstance(doc_stride, bool) or not isinstance(doc_stride, int)
                                       or doc_stride < 1):
            raise ValueError(f"doc_stride must be a positive number of pieces (or None: half a window), got "
                             f"{doc_stride!r}")
        inputs = id_inputs()
        sequence = keras.layers.Dropout(dropout, name="head_dropout")(encoder(inputs)["sequence_output"])
        logits = dense_head(num_labels, encoder.config.initializer_range, "logits")(sequence)
        super().__init__(inputs, logits, encoder, preprocessor, name=name, num_labels=num_labels, dropout=dropout,
                         label_names=label_names, doc_stride=doc_stride)

    target_padding = IGNORE                     # piece labels [B, S] padded on JAX are ignored, as padding is

    def call(self, inputs, training=None, mask=None):
        """Unpacked: the functional graph as built. Packed rows (encoder.is_packed: `finetune --pack`, several
        sentences a row, attention within each): the encoder on the packed row, then the same dropout and head on
        every token -> logits [B, S, K], each sentence's as if alone; the compiled loss (the mean over labelled
        pieces, IGNORE elsewhere) is then the unpacked loss of the same sentences."""
        if not is_packed(inputs):
            return super().call(inputs, training=training, mask=mask)
        out = self.encoder({k: inputs[k] for k in INPUT_NAMES + PACKED_INPUT_NAMES}, training=training)
        return self.get_layer("logits")(self.get_layer("head_dropout")(out["sequence_output"], training=training))

    def compute_output_spec(self, inputs, training=None, mask=None):
        if not is_packed(inputs):
            return super().compute_output_spec(inputs, training=training, mask=mask)
        b, s = inputs["input_word_ids"].shape
        return keras.KerasTensor((b, s, self._task_args["num_labels"]), "float32")

    @property
    def label_names(self) -> list[str]:
        """The IOB2 label of each logit, in order."""
        return self._task_args["label_names"]

    @property
    def doc_stride(self) -> int:
        """Pieces between the starts of consecutive windows over a long text: the given `doc_stride`, else half
        of the pieces a window holds (the preprocessor's seq_length, else max_seq_length, less [CLS] and [SEP])."""
        pre = self.require_preprocessor()
        return self._task_args["doc_stride"] or max(((pre.seq_length or pre.max_seq_length) - 2) // 2, 1)

    def slices(self, x, y=None):
        """Lists of words (and of labels, ids or names) -> ragged tensors for from_tensor_slices."""
        x = tf.ragged.constant(x, tf.string) if isinstance(x, list) and x and isinstance(x[0], (list, tuple)) else x
        if isinstance(y, list):
            y = tf.ragged.constant([[self.label_names.index(t) if isinstance(t, str) else t for t in row]
                                    for row in y], tf.int32)
        return x if y is None else (x, y)

    def batch(self, ds, batch_size, drop_remainder):
        """Sentences of different word counts batch as ragged tensors."""
        return ds.ragged_batch(batch_size, drop_remainder=drop_remainder)

    def preprocess(self, x):
        """Words [B, (words)] (RaggedTensor) or sentences [B] -> the id dict [B, S]."""
        if isinstance(x, tf.RaggedTensor):                              # words
            return tag_inputs(self.require_preprocessor(), x)[0]
        return self.require_preprocessor()(x)                           # sentences

    def prepare_targets(self, x, y):
        """Words [B, (words)] and word labels -> (ids, piece labels [B, S] with IGNORE off first pieces)."""
        ids, labels, _ = tag_inputs(self.require_preprocessor(), x, y)
        return ids, labels

    def tag_words(self, words, batch_size: int = 64) -> list[list[str]]:
        """Labels pre-split words, for people: one label per word, the label of its first piece.

        Args:
            words: list of lists of str. Each sentence as its words (CoNLL's tokenisation).
            batch_size: int. Sentences per model call.

        Returns:
            list of lists of str: one label per word; "O" for a word with no piece or past the sequence length.

        Example:
            >>> model.tag_words([["Ada", "Lovelace", "wrote", "it"]])       # doctest: +SKIP
            [['B-PER', 'I-PER', 'O', 'O']]
        """
        rows = [list(w) for w in words]
        flat = [w for row in rows for w in row]
        ragged = tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.string, shape=[len(flat)]),
                                                  tf.constant([len(row) for row in rows], tf.int64))
        names = np.array(list(self.label_names) + ["O"], object)          # label id -1 (no piece) reads "O"
        predicted = []
        for out in self.batched("_word_label_ids", ragged, batch_size=batch_size):
            labels = names[out["label_ids"]].tolist()
            ends = np.cumsum(out["row_lengths"])
            predicted += [labels[end - n:end] for n, end in zip(out["row_lengths"], ends)]
        return predicted

    def _word_label_ids(self, words) -> dict:
        """words [B, (words)] -> {"label_ids": [words in the batch] int32, each word's first piece's best label
        (-1 for a word with no piece in the sequence), "row_lengths": [B] int64}, in-graph."""
        x, _, word_index = tag_inputs(self.require_preprocessor(), words)
        best = tf.argmax(self.inference(x), axis=-1, output_type=tf.int32)                  # [B, L]
        first = word_index >= 0
        where = tf.where(first)                                                             # [words kept, 2]
        flat = tf.gather(words.row_splits, where[:, 0]) + tf.cast(tf.boolean_mask(word_index, first), tf.int64)
        label_ids = tf.tensor_scatter_nd_update(tf.fill(tf.shape(words.flat_values, out_type=tf.int64), -1),
                                                flat[:, None], tf.boolean_mask(best, first))
        return {"label_ids": label_ids, "row_lengths": words.row_lengths()}

    def serve(self, text) -> dict:
        """text [B] -> per WordPiece of the whole text: "tokens", "labels" [B, T] strings, "start", "end" [B, T]
        character offsets, "token_mask" [B, T]; per entity (IOB2 spans over words): "entity_start", "entity_end"
        [B, E] characters (-1 pad), "entity_type", "entity_text" [B, E] ("" pad). A text longer than a window is
        windowed as SQuAD's contexts (squad_windows without questions, `doc_stride`); each piece is labelled in
        its max-context window."""
        pre = self.require_preprocessor()
        windows = squad_windows(pre, None, text, doc_stride=self.doc_stride)
        best = tf.argmax(self.inference({k: windows[k] for k in INPUT_NAMES}), axis=-1)    # [W, L]
        # Each piece is max-context in exactly one window: gather it from there, then put the pieces in text order.
        # (Flat tensors and raw ops, as tag_inputs: ragged helpers add hundreds of shape-check nodes to the graph.)
        at = tf.where(windows["max_context"])                                               # [P, 2] (window, column)
        at = tf.gather(at, tf.math.invert_permutation(tf.gather_nd(windows["token_index"], at)))
        row = tf.cast(tf.gather(windows["example_index"], at[:, 0]), tf.int64)              # [P] ascending
        splits = tf.concat([[0], upper_bound(row, tf.range(tf.shape(text, out_type=tf.int64)[0]))], 0)  # [B + 1]
        width = tf.reduce_max(tf.concat([[0], splits[1:] - splits[:-1]], 0))                # T

        def dense(values, fill):                                          # [P] -> [B, T], `fill` after a row
            return tf.raw_ops.RaggedTensorToTensor(
                shape=tf.stack([tf.constant(-1, tf.int64), width]), values=values,
                default_value=tf.constant(fill, values.dtype), row_partition_tensors=[splits],
                row_partition_types=["ROW_SPLITS"])

        ids = tf.gather_nd(windows["input_word_ids"], at)
        starts, ends = tf.gather_nd(windows["token_start"], at), tf.gather_nd(windows["token_end"], at)
        labels = tf.gather(tf.constant(self.label_names), tf.gather_nd(best, at))
        out = {"tokens": dense(tf.gather(tf.constant(pre.vocab), ids), ""), "labels": dense(labels, ""),
               "start": dense(row_char_offsets(text, row, starts), -1),
               "end": dense(row_char_offsets(text, row, ends), -1), "token_mask": dense(tf.ones_like(ids), 0)}
        ids, starts, ends, labels = (tf.RaggedTensor.from_row_splits(v, splits, validate=False)
                                     for v in (ids, starts, ends, labels))
        return {**out, **entity_spans(text, ids, starts, ends, labels, pre)}

    def entities(self, texts) -> list[list[tuple[int, int, str, str]]]:
        """Finds the entities in raw texts, for people: `serve` (the export's decoding) in Python. A text longer
        than the sequence length is windowed (see `serve`): every word is labelled, once.

        Args:
            texts: list of str (or a [B] array). Untokenised sentences or documents, of any length; one str is
                one text (a list of one result).

        Returns:
            Per text, its entities in order as (start, end, type, text) tuples, [start, end) in characters.

        Example:
            >>> model.entities(["Ada Lovelace wrote it."])          # doctest: +SKIP
            [[(0, 12, 'PER', 'Ada Lovelace')]]
        """
        return [[(int(s), int(e), t.decode(), x.decode()) for s, e, t, x in zip(*row) if s >= 0]
                for out in self.serve_batches(texts)
                for row in zip(out["entity_start"], out["entity_end"], out["entity_type"], out["entity_text"])]


def entity_spans(text, ids, starts, ends, labels, preprocessor) -> dict:
    """IOB2 labels of word pieces -> entities, in-graph. text [B]; ids, starts, ends (bytes), labels (strings):
    RaggedTensors [B, (pieces)]. Words are BertPreprocessor.words' (a piece not starting "##" and the "##" pieces
    after it), each labelled by its first piece. seqeval's default rule: an entity starts at B-X, or at I-X not
    continuing an X (after O or another type); it ends where the next word does not continue it. Returns
    entity_start, entity_end [B, E] (characters, -1 pad), entity_type, entity_text [B, E] ("" pad), in order."""
    words = preprocessor.words(ids)                                            # [B, (words), (pieces)]
    word_rows, word_splits = words.row_splits, words.values.row_splits         # [B + 1], [W + 1] (flat tensors)
    first, last = word_splits[:-1], word_splits[1:] - 1                        # [W] flat piece indices
    num_words = tf.size(first, out_type=tf.int64)
    w_begin = tf.gather(starts.flat_values, first)                             # bytes
    w_end = tf.gather(ends.flat_values, last)
    w_row = row_ids(word_rows, num_words)
    w_label = tf.gather(labels.flat_values, first)
    w_first = tf.equal(tf.range(num_words), tf.gather(word_rows, w_row))      # a row's first word
    tagged = tf.strings.regex_full_match(w_label, "[BI]-.+")
    w_type = tf.where(tagged, tf.strings.regex_replace(w_label, "^[BI]-", ""), "")
    previous = tf.where(w_first, "", tf.concat([[""], w_type[:-1]], 0))
    begin = tagged & (tf.strings.regex_full_match(w_label, "B-.+") | tf.not_equal(previous, w_type))
    # Every tagged word is in an entity: the first of a row, or one after O or another type, begins one.
    tagged_at, begin_at = tf.where(tagged)[:, 0], tf.where(begin)[:, 0]    # (boolean_mask: ~20 nodes each)
    entity = tf.gather(tf.cumsum(tf.cast(begin, tf.int32)) - 1, tagged_at)
    count = tf.size(begin_at)
    e_start = tf.math.unsorted_segment_min(tf.gather(w_begin, tagged_at), entity, count)
    e_end = tf.math.unsorted_segment_max(tf.gather(w_end, tagged_at), entity, count)
    e_row = tf.gather(w_row, begin_at)                                         # ascending
    e_splits = tf.concat([[0], upper_bound(e_row, tf.range(tf.shape(text, out_type=tf.int64)[0]))], 0)

    def per_row(values, fill):                                                 # [E total] -> [B, E], padded
        return tf.raw_ops.RaggedTensorToTensor(
            shape=tf.constant([-1, -1], tf.int64), values=values, default_value=tf.constant(fill, values.dtype),
            row_partition_tensors=[e_splits], row_partition_types=["ROW_SPLITS"])

    e_text = tf.strings.substr(tf.gather(text, e_row), e_start, e_end - e_start)
    chars = lambda byte_offsets: row_char_offsets(text, e_row, byte_offsets)  # noqa: E731  (linear in the text)
    return {"entity_start": per_row(chars(e_start), -1), "entity_end": per_row(chars(e_end), -1),
            "entity_type": per_row(tf.gather(w_type, begin_at), ""), "entity_text": per_row(e_text, "")}
