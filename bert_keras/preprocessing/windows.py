"""SQuAD's doc stride, in-graph: (question, context) strings -> overlapping windows over the context, each packed
as [CLS] question [SEP] context-window [SEP], with every token's byte offsets into the context.

google-research's run_squad.py rules, exactly:
- the question keeps its first `max_query_length` tokens;
- a window holds max_seq_length - len(question) - 3 context tokens; window k starts at k * doc_stride (the stride
  shrinks to the window size if that is smaller), and the last window is the first that reaches the end;
- a token seen in several windows belongs to the one where it has the most context on both sides
  (score min(left, right) + 0.01 * window length, the first window on ties): answers may only start there.
An empty context still gets one (empty) window, so every question has an answer slot.
Without questions (token tagging of a long text) each window is [CLS] context-window [SEP] and holds
max_seq_length - 2 context tokens; the other rules are the same.

The same function makes training features (tf.data on the host) and runs inside the exported SavedModel.

Shapes: questions, contexts [B] strings -> dict with W windows (W >= B), L the packed length:
  input_word_ids, input_mask, input_type_ids  int32 [W, L]
  example_index     int32 [W]     which question each window belongs to
  token_start, token_end int64 [W, L]  [start, end) bytes of the token in its context; -1 off the context
  max_context       bool  [W, L]  the token's best window is this one (False off the context)
  token_index       int64 [W, L]  the token's index among all the contexts' tokens, flat in batch order (the
                                  contexts' tokenize_with_offsets().flat_values); -1 off the context
With answer byte spans (answer_start, answer_end [B], -1 for none) it also returns start_positions,
end_positions int32 [W]: the answer's first and last token in the window, 0 ([CLS]) when the window does not
hold the whole answer, as google-research trains.
"""

from __future__ import annotations

import tensorflow as tf

from bert_keras.preprocessing.ragged_rows import position_in_row, row_ids, splits_from_lengths


def squad_windows(preprocessor, questions, contexts, *, doc_stride: int = 128, max_query_length: int = 64,
                  answer_start=None, answer_end=None) -> dict:
    """Questions and contexts [B] -> the windows' dict (see the module docstring), with run_squad.py's rules.

    The window length is the preprocessor's `seq_length`, else its `max_seq_length`. The options are
    keyword-only (two ints and two offset arrays that must not be swapped). `questions` None: windows of the
    contexts alone, [CLS] window [SEP] (token tagging of a long text).
    """
    # Flat tensors and raw ops: RaggedTensor helpers (slicing, broadcasting arithmetic, concat) made this graph
    # ~3,500 nodes, and tf.data optimises a map's graph again for every iterator (~2 s an epoch on 2 cores).
    seq_length = preprocessor.seq_length or preprocessor.max_seq_length
    ids, starts, ends = preprocessor.tokenize_with_offsets(contexts)                    # [B, (c)]
    c_len = ids.row_lengths()
    if questions is None:
        q_len, specials = tf.zeros_like(c_len), 2                                       # [CLS] window [SEP]
    else:
        questions_all = preprocessor.tokenize(questions)                                # [B, (q)]
        q_len, specials = tf.minimum(questions_all.row_lengths(), max_query_length), 3  # the first max_query_length
    room = tf.maximum(seq_length - q_len - specials, 1)                                 # context tokens a window holds
    stride = tf.minimum(room, doc_stride)
    extra = tf.maximum(c_len - room, 0)
    num_windows = 1 + (extra + stride - 1) // stride                                    # [B]
    example = tf.repeat(tf.range(tf.size(c_len, out_type=tf.int64)), num_windows)        # [W]
    k = position_in_row(splits_from_lengths(num_windows))                      # window number in its example
    w_start = k * tf.gather(stride, example)                                            # [W] first context token
    w_len = tf.minimum(tf.gather(c_len, example) - w_start, tf.gather(room, example))   # [W]

    # Every window token, flat [T]: its window, its place in the window, its index in ids.flat_values.
    window_splits = splits_from_lengths(w_len)
    token_window = row_ids(window_splits, window_splits[-1])
    in_window = position_in_row(window_splits)
    where = tf.gather(tf.gather(ids.row_splits, example) + w_start, token_window) + in_window
    window_ids = tf.RaggedTensor.from_row_splits(tf.gather(ids.flat_values, where), window_splits, validate=False)
    if questions is None:
        packed = preprocessor.pack([window_ids])
    else:                                       # the question of each window, flat: its first q_len tokens
        qw_splits = splits_from_lengths(tf.gather(q_len, example))
        q_window = row_ids(qw_splits, qw_splits[-1])
        q_source = tf.gather(tf.gather(questions_all.row_splits, example), q_window) + position_in_row(qw_splits)
        window_questions = tf.RaggedTensor.from_row_splits(tf.gather(questions_all.flat_values, q_source),
                                                           qw_splits, validate=False)
        packed = preprocessor.pack([window_questions, window_ids])
    shape = tf.shape(packed["input_word_ids"], out_type=tf.int64)
    length = tf.cast(shape[1], tf.int32)

    # Max-context rule: score each (window, token); the best window of a token is the first with the top score.
    token_len = tf.gather(w_len, token_window)
    score = (tf.cast(tf.minimum(in_window, token_len - 1 - in_window), tf.float64)
             + 0.01 * tf.cast(token_len, tf.float64)
             - 1e-6 * tf.cast(tf.gather(k, token_window), tf.float64))                  # earlier window wins ties
    best = tf.math.unsorted_segment_max(score, where, tf.size(ids.flat_values))
    is_best = tf.equal(score, tf.gather(best, where))

    offset = specials - 1 + tf.gather(q_len, example)                          # [CLS] (question [SEP])
    column = tf.gather(offset, token_window) + in_window
    fits = column < shape[1]
    at = tf.boolean_mask(tf.stack([token_window, column], 1), fits)

    def place(values, fill):                                                            # [T] -> [W, L]
        return tf.tensor_scatter_nd_update(tf.fill(shape, fill), at, tf.boolean_mask(values, fits))

    out = dict(packed, example_index=tf.cast(example, tf.int32),
               token_start=place(tf.gather(starts.flat_values, where), tf.constant(-1, tf.int64)),
               token_end=place(tf.gather(ends.flat_values, where), tf.constant(-1, tf.int64)),
               max_context=place(is_best, False), token_index=place(where, tf.constant(-1, tf.int64)))
    if answer_start is not None:
        a_start = tf.gather(tf.cast(answer_start, tf.int64), example)[:, None]
        a_end = tf.gather(tf.cast(answer_end, tf.int64), example)[:, None]
        tok_start, tok_end = out["token_start"], out["token_end"]
        in_context = tok_start >= 0
        # google-research: first token ending after the answer start, last token starting before its end.
        first = tf.argmax(tf.cast(in_context & (tok_end > a_start), tf.int32), axis=1, output_type=tf.int32)
        last_mask = in_context & (tok_start < a_end)
        last = length - 1 - tf.argmax(tf.cast(tf.reverse(last_mask, [1]), tf.int32), axis=1, output_type=tf.int32)
        window_first = tf.cast(offset, tf.int32)
        window_last = window_first + tf.cast(w_len, tf.int32) - 1
        # The whole answer must lie in the window: it starts at/after its first token and ends at/before its last.
        inside = ((a_start[:, 0] >= 0)
                  & (tf.gather_nd(tok_start, tf.stack([tf.range(tf.size(example)), window_first], 1),
                                  ) <= a_start[:, 0])
                  & (w_len > 0)
                  & (tf.gather_nd(tok_end, tf.stack([tf.range(tf.size(example)), tf.maximum(window_last, 0)], 1))
                     >= a_end[:, 0]))
        out["start_positions"] = tf.where(inside, first, 0)
        out["end_positions"] = tf.where(inside, last, 0)
    return out

