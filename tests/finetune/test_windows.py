"""SQuAD doc-stride windows against google-research run_squad.py's own rules (tests/squad_rules.py), on HF tokens;
also the windows of a text alone (no question), as the tagger cuts a long text."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import read_squad
from bert_keras.finetune.squad import answer_chars
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.preprocessing.windows import squad_windows
from squad_rules import google_doc_spans, google_is_max_context


def byte_offsets(text, char_offsets):
    prefix = np.cumsum([0] + [len(c.encode("utf-8")) for c in text])
    return [(int(prefix[s]), int(prefix[e])) for s, e in char_offsets]


@pytest.mark.parametrize("seq_length,doc_stride,max_query", [(64, 16, 12), (96, 40, 64), (384, 128, 64)])
def test_windows_match_google_research(minilm_vocab, hf_tokenizer, shared_data, seq_length, doc_stride, max_query):
    examples = read_squad(shared_data / "squad" / "train-split-v1.1.json")[::97][:40]
    pre = BertPreprocessor(minilm_vocab, seq_length=seq_length, max_seq_length=seq_length)
    spans = np.array([byte_offsets(e.context, [answer_chars(e)])[0] for e in examples])
    out = squad_windows(pre, tf.constant([e.question for e in examples]), tf.constant([e.context for e in examples]),
                        doc_stride=doc_stride, max_query_length=max_query, answer_start=spans[:, 0],
                        answer_end=spans[:, 1])
    out = {k: v.numpy() for k, v in out.items()}
    w = 0
    multi = 0
    before = 0                                          # the tokens of the contexts before this one
    for i, e in enumerate(examples):
        query = hf_tokenizer.encode(e.question, add_special_tokens=False).ids[:max_query]
        enc = hf_tokenizer.encode(e.context, add_special_tokens=False)
        offsets = byte_offsets(e.context, enc.offsets)
        doc_spans = google_doc_spans(len(enc.ids), seq_length - len(query) - 3, doc_stride)
        multi += len(doc_spans) > 1
        a_start, a_end = spans[i]
        tok_start = next(t for t, (s, end) in enumerate(offsets) if end > a_start)
        tok_end = max(t for t, (s, end) in enumerate(offsets) if s < a_end)
        for index, (start, length) in enumerate(doc_spans):
            assert out["example_index"][w] == i
            want = [101] + query + [102] + enc.ids[start:start + length] + [102]
            got = out["input_word_ids"][w]
            assert got[:len(want)].tolist() == want and not got[len(want):].any()
            context_at = len(query) + 2
            for j in range(length):
                assert (out["token_start"][w, context_at + j], out["token_end"][w, context_at + j]) == \
                    offsets[start + j]
                assert out["max_context"][w, context_at + j] == google_is_max_context(doc_spans, index, start + j)
                assert out["token_index"][w, context_at + j] == before + start + j
            assert not out["max_context"][w, :context_at].any() and (out["token_start"][w, :context_at] == -1).all()
            inside = start <= tok_start and tok_end <= start + length - 1
            want_positions = (tok_start - start + context_at, tok_end - start + context_at) if inside else (0, 0)
            assert (out["start_positions"][w], out["end_positions"][w]) == want_positions
            w += 1
        before += len(enc.ids)
    assert w == len(out["example_index"])
    if seq_length < 384:
        assert multi > len(examples) // 2          # the test does exercise the stride


def test_empty_and_tiny_contexts_get_one_window(minilm_vocab):
    pre = BertPreprocessor(minilm_vocab, seq_length=32, max_seq_length=32)
    out = squad_windows(pre, tf.constant(["who?", "what is it?"]), tf.constant(["", "It."]))
    assert out["example_index"].numpy().tolist() == [0, 1]
    assert out["max_context"].numpy().sum(1).tolist() == [0, 2]


@pytest.mark.parametrize("seq_length,doc_stride", [(16, 7), (32, 15), (32, 64)])
def test_windows_of_texts_alone_match_google_research(minilm_vocab, hf_tokenizer, seq_length, doc_stride):
    """No questions (the tagger's long texts): [CLS] window [SEP], windows of seq_length - 2 tokens, the same
    doc stride and max-context rules; token_index is the token's flat index among all the texts' tokens."""
    words = "the Zürich report of unbelievably long meetings said nothing , twice".split()
    texts = ["", "short text", " ".join(words[i % len(words)] for i in range(97)), "x " * 30]
    pre = BertPreprocessor(minilm_vocab, seq_length=seq_length, max_seq_length=seq_length)
    out = {k: v.numpy() for k, v in squad_windows(pre, None, tf.constant(texts), doc_stride=doc_stride).items()}
    assert (out["input_type_ids"] == 0).all()
    w, before = 0, 0
    for i, text in enumerate(texts):
        enc = hf_tokenizer.encode(text, add_special_tokens=False)
        offsets = byte_offsets(text, enc.offsets)
        doc_spans = google_doc_spans(len(enc.ids), seq_length - 2, doc_stride) or [(0, 0)]    # "" gets one window
        for index, (start, length) in enumerate(doc_spans):
            assert out["example_index"][w] == i
            want = [101] + enc.ids[start:start + length] + [102]
            got = out["input_word_ids"][w]
            assert got[:len(want)].tolist() == want and not got[len(want):].any()
            for j in range(length):
                assert (out["token_start"][w, 1 + j], out["token_end"][w, 1 + j]) == offsets[start + j]
                assert out["max_context"][w, 1 + j] == google_is_max_context(doc_spans, index, start + j)
                assert out["token_index"][w, 1 + j] == before + start + j
            assert (out["token_index"][w, 1 + length:] == -1).all() and out["token_index"][w, 0] == -1
            w += 1
        before += len(enc.ids)
    assert w == len(out["example_index"]) and w > len(texts) + 3            # the long text has several windows
