"""Best spans against google-research run_squad.py write_predictions (transcribed below) on random logits."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import read_squad
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.preprocessing.windows import squad_windows
from bert_keras.tasks.span_decoding import best_spans


def google_best(windows, start_logits, end_logits, example, n_best_size, max_answer_length):
    """write_predictions' candidate rules for one example: (best byte span or None, null score)."""
    prelim, null = [], None
    for w in np.flatnonzero(windows["example_index"] == example):
        s_log, e_log = start_logits[w], end_logits[w]
        null = min(null, s_log[0] + e_log[0]) if null is not None else s_log[0] + e_log[0]
        best_starts = sorted(range(len(s_log)), key=lambda i: s_log[i], reverse=True)[:n_best_size]
        best_ends = sorted(range(len(e_log)), key=lambda i: e_log[i], reverse=True)[:n_best_size]
        in_doc = windows["token_start"][w] >= 0
        for s in best_starts:
            for e in best_ends:
                if not in_doc[s] or not in_doc[e] or not windows["max_context"][w, s]:
                    continue
                if e < s or e - s + 1 > max_answer_length:
                    continue
                prelim.append((s_log[s] + e_log[e], windows["token_start"][w, s], windows["token_end"][w, e]))
    prelim.sort(key=lambda x: x[0], reverse=True)
    return (prelim[0] if prelim else None), null


@pytest.mark.parametrize("n_best_size,max_answer_length", [(20, 30), (5, 4)])
def test_best_spans_match_google_research(minilm_vocab, shared_data, n_best_size, max_answer_length):
    examples = read_squad(shared_data / "squad" / "train-split-v1.1.json")[::131][:24]
    pre = BertPreprocessor(minilm_vocab, seq_length=96, max_seq_length=96)
    windows = squad_windows(pre, tf.constant([e.question for e in examples]),
                            tf.constant([e.context for e in examples]), doc_stride=32)
    rng = np.random.default_rng(0)
    shape = windows["input_word_ids"].shape
    start_logits, end_logits = rng.normal(size=shape).astype("float32"), rng.normal(size=shape).astype("float32")
    got = best_spans(start_logits, end_logits, windows, len(examples), n_best_size, max_answer_length)
    got = {k: v.numpy() for k, v in got.items()}
    windows = {k: v.numpy() for k, v in windows.items()}
    found = 0
    for i in range(len(examples)):
        best, null = google_best(windows, start_logits, end_logits, i, n_best_size, max_answer_length)
        assert got["null_score"][i] == pytest.approx(null, abs=1e-5)
        if best is None:
            assert (got["start"][i], got["end"][i]) == (-1, -1)
            continue
        found += 1
        assert (got["start"][i], got["end"][i]) == (best[1], best[2])
        assert got["score"][i] == pytest.approx(best[0], abs=1e-5)
    assert found > len(examples) // 2
