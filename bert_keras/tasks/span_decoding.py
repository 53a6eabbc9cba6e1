"""Span logits of every window -> each question's best answer span, in-graph (evaluation and serving share it).

google-research's run_squad.py write_predictions, exactly: per window take the `n_best_size` highest start
logits and the `n_best_size` highest end logits (over all positions), keep pairs whose start is a context token in
its max-context window, whose end is a context token, end >= start and end - start + 1 <= max_answer_length;
score = start logit + end logit; the best over the question's windows wins. SQuAD 2.0: the null score is
start_logits[0] + end_logits[0] of the window where it is smallest; the answer is empty when
null_score - best_score > null_score_diff_threshold.

Shapes: start_logits, end_logits [W, L]; windows: squad_windows' dict; num_examples B ->
  start, end   int64 [B]  byte offsets of the answer in the context ([start, end)); -1, -1 when none
  score        float32 [B] best span score (-inf when no valid span)
  null_score   float32 [B]
  null_odds    float32 [B] null_score - score (SQuAD 2.0's na_prob input to the metric)
"""

from __future__ import annotations

import tensorflow as tf


def best_spans(start_logits, end_logits, windows: dict, num_examples, n_best_size: int = 20,
               max_answer_length: int = 30) -> dict:
    """Each question's best span over its windows' logits (run_squad.py's rules; shapes in the module docstring)."""
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    length = tf.shape(start_logits)[1]
    k = tf.minimum(n_best_size, length)
    top_start, start_at = tf.math.top_k(start_logits, k)                                  # [W, k]
    top_end, end_at = tf.math.top_k(end_logits, k)
    start_ok = tf.gather(windows["max_context"], start_at, batch_dims=1)                  # context + max context
    end_ok = tf.gather(windows["token_start"], end_at, batch_dims=1) >= 0
    # expand_dims, not x[:, None]: LiteRT's STRIDED_SLICE has no new_axis_mask (the LiteRT export runs this).
    row, col = (lambda x: tf.expand_dims(x, 2)), (lambda x: tf.expand_dims(x, 1))
    span = col(end_at) - row(start_at)                                                    # [W, k, k]
    valid = row(start_ok) & col(end_ok) & (span >= 0) & (span < max_answer_length)
    none = tf.float32.min                          # no valid span (segment max starts from it, not from -inf)
    score = tf.where(valid, row(top_start) + col(top_end), none)
    flat = tf.reshape(score, [-1, k * k])
    pair = tf.argmax(flat, axis=1, output_type=tf.int32)                                  # [W]; first on ties
    window_score = tf.reduce_max(flat, axis=1)
    s_tok = tf.gather(start_at, pair // k, batch_dims=1)
    e_tok = tf.gather(end_at, pair % k, batch_dims=1)

    example = windows["example_index"]
    best = tf.math.unsorted_segment_max(window_score, example, num_examples)              # [B]
    # The first window reaching the example's best score (google keeps the first in a stable sort).
    w = tf.range(tf.shape(example)[0])
    is_best = tf.equal(window_score, tf.gather(best, example))
    chosen = tf.math.unsorted_segment_min(tf.where(is_best, w, tf.int32.max), example, num_examples)
    found = best > none
    chosen = tf.where(found, chosen, 0)
    start = tf.gather_nd(windows["token_start"], tf.stack([chosen, tf.gather(s_tok, chosen)], 1))
    end = tf.gather_nd(windows["token_end"], tf.stack([chosen, tf.gather(e_tok, chosen)], 1))
    null = tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0], example, num_examples)
    best = tf.where(found, best, float("-inf"))
    return {"start": tf.where(found, start, -1), "end": tf.where(found, end, -1), "score": best,
            "null_score": null, "null_odds": null - best}


def answer_text(contexts, start, end):
    """The answer strings: bytes [start, end) of each context ("" where start is -1)."""
    start = tf.maximum(start, 0)
    return tf.strings.substr(contexts, start, tf.maximum(end - start, 0))
