"""The tagging and span answers of the LiteRT export, on LiteRT builtins (litert.py uses them).

The SavedModel's BertTagger.serve and BertSpanLabeler.serve use ragged ops, regexes on label strings and
substrings, which LiteRT has no kernels for. These are the same computations on dense tensors: the label
strings' IOB2 roles are read once at export time into tables indexed by label id, and the texts the SavedModel
cuts out (entity_text, answer) are left to the caller, which has the text and gets character offsets
(savedmodels/litert_runner.py cuts them).
"""

from __future__ import annotations

import tensorflow as tf

from savedmodels.litert_text import Tokens, row_ids


def char_offsets(text, byte_offsets, rows):
    """Byte offsets [...] into text[rows] -> character offsets (code points) [...]; -1 stays -1."""
    from savedmodels.litert_text import _bytes, _is_char_start
    raw, splits = _bytes(text)
    is_char = _is_char_start(raw)
    before = tf.concat([[0], tf.cumsum(is_char)], 0)
    base = tf.gather(splits, rows)
    chars = tf.gather(before, base + tf.maximum(byte_offsets, 0)) - tf.gather(before, base)
    return tf.where(byte_offsets >= 0, chars, -1)


def _dense(values, splits, width, fill):
    """Flat values [N] with row splits [B + 1] -> [B, width], `fill` past each row's end."""
    positions = tf.range(width)[None, :]
    lengths = splits[1:] - splits[:-1]
    inside = positions < lengths[:, None]
    pool = tf.concat([values, tf.reshape(tf.cast(fill, values.dtype), [1])], 0)
    index = tf.where(inside, splits[:-1, None] + positions, tf.size(values))
    return tf.gather(pool, index), inside


def _iob2_tables(label_names):
    """Per label id: tagged (B-/I-), begins (B-), type index; and the type names."""
    types = sorted({name[2:] for name in label_names if name[:2] in ("B-", "I-")})
    tagged = [name[:2] in ("B-", "I-") for name in label_names]
    begins = [name.startswith("B-") for name in label_names]
    kind = [types.index(name[2:]) if t else -1 for name, t in zip(label_names, tagged)]
    return tf.constant(tagged), tf.constant(begins), tf.constant(kind, tf.int32), types


def choose(model, context, endings) -> dict:
    """BertMultipleChoice.serve, with the chosen ending gathered from the flat endings (LiteRT's GATHER takes
    no batch_dims on strings)."""
    logits = tf.cast(model(model.preprocess((context, endings)), training=False), tf.float32)
    prediction = tf.argmax(logits, -1)
    choices = tf.shape(endings, out_type=tf.int64)[1]
    flat = tf.range(tf.shape(endings, out_type=tf.int64)[0]) * choices + prediction
    return {"logits": logits, "probabilities": tf.nn.softmax(logits), "prediction": prediction,
            "ending": tf.gather(tf.reshape(endings, [-1]), flat)}


def tag(model, pre, text) -> dict:
    """BertTagger.serve's outputs but entity_text (see the module docstring)."""
    tokens = pre.tokenizer.tokenize(text, offsets=True)
    x = pre.pack([tokens])
    budget = tf.shape(x["input_word_ids"])[1] - 2
    kept = tf.minimum(tokens.lengths(), budget)                                             # [B]
    width = tf.reduce_max(tf.concat([kept, [0]], 0))
    best = tf.cast(tf.argmax(model(x, training=False), axis=-1), tf.int32)[:, 1:]          # drop [CLS]
    # The kept pieces, flat, in row order: the first `kept` of each row.
    splits = tf.concat([[0], tf.cumsum(kept)], 0)
    n = splits[-1]
    row = row_ids(splits, n)
    within = tf.range(n) - tf.gather(splits, row)
    source = tf.gather(tokens.splits, row) + within
    ids = tf.gather(tokens.ids, source)
    starts, ends = tf.gather(tokens.starts, source), tf.gather(tokens.ends, source)
    labels = tf.gather_nd(best, tf.stack([row, within], 1))                                  # [n] label ids
    names = tf.constant(list(model.label_names) + [""])
    vocab = tf.constant(list(pre.vocab) + [""])
    dense_ids, mask = _dense(ids, splits, width, len(pre.vocab))
    dense_labels, _ = _dense(labels, splits, width, len(model.label_names))
    out = {"tokens": tf.gather(vocab, dense_ids), "labels": tf.gather(names, dense_labels),
           "start": char_offsets(text, _dense(starts, splits, width, -1)[0], tf.range(tf.size(kept))[:, None]),
           "end": char_offsets(text, _dense(ends, splits, width, -1)[0], tf.range(tf.size(kept))[:, None]),
           "token_mask": tf.cast(mask, tf.int32)}
    return {**out, **_entities(text, Tokens(ids, splits, starts, ends), labels, row, pre, model.label_names)}


def _entities(text, tokens, labels, row, pre, label_names) -> dict:
    """entity_start, entity_end [B, E] characters (-1 pad), entity_type [B, E] ("" pad): entity_spans' rules
    (seqeval's IOB2: an entity starts at B-X, or at I-X not continuing an X), words as BertPreprocessor.words."""
    tagged_of, begins_of, type_of, types = _iob2_tables(label_names)
    n = tf.size(tokens.ids)
    first = tf.logical_not(tf.gather(pre.tokenizer.continues, tokens.ids))                  # [n] word starts
    word = tf.cumsum(tf.cast(first, tf.int32)) - 1                                          # [n]
    num_words = tf.reduce_sum(tf.cast(first, tf.int32))
    first_piece = tf.reshape(tf.where(first), [-1])                                         # [w]
    w_begin = tf.gather(tokens.starts, first_piece)
    w_end = tf.math.unsorted_segment_max(tokens.ends, word, num_words)
    w_row = tf.gather(row, first_piece)
    w_label = tf.gather(labels, first_piece)
    w_first = tf.concat([[True], tf.not_equal(w_row[1:], w_row[:-1])], 0)[:num_words]       # a row's first word
    tagged = tf.gather(tagged_of, w_label)
    w_type = tf.gather(type_of, w_label)
    previous = tf.where(w_first, -1, tf.concat([[-1], w_type[:-1]], 0)[:num_words])      # -1: O or none
    begin = tagged & (tf.gather(begins_of, w_label) | tf.not_equal(previous, w_type))
    entity = tf.cumsum(tf.cast(begin, tf.int32)) - 1                                        # [w]
    count = tf.reduce_sum(tf.cast(begin, tf.int32))
    tagged_at = tf.reshape(tf.where(tagged), [-1])
    e_start = tf.math.unsorted_segment_min(tf.gather(w_begin, tagged_at), tf.gather(entity, tagged_at), count)
    e_end = tf.math.unsorted_segment_max(tf.gather(w_end, tagged_at), tf.gather(entity, tagged_at), count)
    begin_at = tf.reshape(tf.where(begin), [-1])
    e_row = tf.gather(w_row, begin_at)
    e_type = tf.gather(w_type, begin_at)
    rows = tf.size(text)
    per_row = tf.math.unsorted_segment_sum(tf.ones_like(e_row), e_row, rows)
    e_splits = tf.concat([[0], tf.cumsum(per_row)], 0)
    width = tf.reduce_max(tf.concat([per_row, [0]], 0))
    starts, _ = _dense(e_start, e_splits, width, -1)
    ends, _ = _dense(e_end, e_splits, width, -1)
    kinds, _ = _dense(e_type, e_splits, width, len(types))
    every_row = tf.range(rows)[:, None]
    return {"entity_start": char_offsets(text, starts, every_row), "entity_end": char_offsets(text, ends, every_row),
            "entity_type": tf.gather(tf.constant(types + [""]), kinds)}


def answer(model, pre, question, context) -> dict:
    """BertSpanLabeler.serve's outputs but answer (see the module docstring): squad_windows' doc stride and
    max-context rule and span_decoding.best_spans, on dense tensors."""
    from bert_keras.tasks.span_decoding import best_spans
    from savedmodels.litert_text import Rows
    a = model._task_args
    seq_length = pre.seq_length or pre.max_seq_length
    q = pre.tokenizer.tokenize(question)
    c = pre.tokenizer.tokenize(context, offsets=True)
    q_len = tf.minimum(q.lengths(), a["max_query_length"])
    c_len = c.lengths()
    room = tf.maximum(seq_length - q_len - 3, 1)                       # context tokens a window holds
    stride = tf.minimum(room, a["doc_stride"])
    num_windows = 1 + (tf.maximum(c_len - room, 0) + stride - 1) // stride                 # [B]
    w_splits = tf.concat([[0], tf.cumsum(num_windows)], 0)
    example = row_ids(w_splits, w_splits[-1])                                               # [W]
    k = tf.range(tf.size(example)) - tf.gather(w_splits, example)                           # window number
    w_start = k * tf.gather(stride, example)
    w_len = tf.minimum(tf.gather(c_len, example) - w_start, tf.gather(room, example))
    w_first = tf.gather(c.splits, example) + w_start                                         # flat index
    x = pre.pack([Rows(q.ids, tf.gather(q.splits, example), tf.gather(q_len, example)),
                  Rows(c.ids, w_first, w_len)])
    length = tf.shape(x["input_word_ids"])[1]
    offset = 2 + tf.gather(q_len, example)                                                  # [CLS] q [SEP]
    j = tf.range(length)[None, :] - offset[:, None]                                          # [W, L]
    inside = (j >= 0) & (j < w_len[:, None])
    flat = tf.where(inside, w_first[:, None] + j, tf.size(c.ids))                           # [W, L]
    # Max-context rule in integers: (min(left, right) * 100 + window length) * 4096 - k is the float64 score
    # min + 0.01 * length - 1e-6 * k scaled, exact while a context has fewer than 4096 windows.
    score = ((tf.minimum(j, w_len[:, None] - 1 - j) * 100 + w_len[:, None]) * 4096 - k[:, None])
    score = tf.where(inside, score, -1)
    best = tf.math.unsorted_segment_max(tf.reshape(score, [-1]), tf.reshape(flat, [-1]), tf.size(c.ids) + 1)
    max_context = inside & tf.equal(score, tf.gather(best, flat))
    token_start = tf.where(inside, tf.gather(tf.concat([c.starts, [-1]], 0), flat), -1)
    token_end = tf.where(inside, tf.gather(tf.concat([c.ends, [-1]], 0), flat), -1)
    logits = model(x, training=False)
    windows = {"max_context": max_context, "token_start": token_start, "token_end": token_end,
               "example_index": example}
    spans = best_spans(logits["start_logits"], logits["end_logits"], windows, tf.size(q_len),
                       a["n_best_size"], a["max_answer_length"])
    start, end = spans["start"], spans["end"]
    if a["version_2"]:
        empty = spans["null_odds"] > a["null_score_diff_threshold"]
        start, end = tf.where(empty, -1, start), tf.where(empty, -1, end)
    rows = tf.range(tf.size(q_len))
    return {"start": char_offsets(context, start, rows), "end": char_offsets(context, end, rows),
            "score": spans["score"], "null_score": spans["null_score"],
            "start_logits": tf.cast(logits["start_logits"], tf.float32),
            "end_logits": tf.cast(logits["end_logits"], tf.float32), "window_example": example}
