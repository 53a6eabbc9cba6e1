"""First-subword labels against HF tokenizers' word_ids() on real CoNLL-2003 sentences."""

import numpy as np
import tensorflow as tf

from bert_keras.data import CONLL2003_LABELS, read_conll2003
from bert_keras.finetune.tagging import TaggingTask
from bert_keras.tasks.tagger import IGNORE, tag_inputs
from bert_keras.preprocessing import BertPreprocessor


def test_first_piece_labels_match_hf_word_ids(minilm_vocab, hf_tokenizer, shared_data):
    sentences = read_conll2003(shared_data / "conll2003" / "valid.txt")[:300]
    sentences = [s for s in sentences if s.tokens][:200]
    pre = BertPreprocessor(minilm_vocab, max_seq_length=48)
    labels = [[CONLL2003_LABELS.index(t) for t in s.tags] for s in sentences]
    x, piece_labels, piece_words = tag_inputs(pre, tf.ragged.constant([list(s.tokens) for s in sentences]),
                                              tf.ragged.constant(labels, tf.int32))
    truncated = 0
    for i, s in enumerate(sentences):
        enc = hf_tokenizer.encode(list(s.tokens), is_pretokenized=True, add_special_tokens=False)
        ids, word_ids = enc.ids[:46], enc.word_ids[:46]
        truncated += len(enc.ids) > 46
        want_ids = [101] + ids + [102]
        assert x["input_word_ids"][i, :len(want_ids)].numpy().tolist() == want_ids
        want_words = [IGNORE] + [w if k == 0 or word_ids[k - 1] != w else IGNORE
                                 for k, w in enumerate(word_ids)] + [IGNORE]
        got_words = piece_words[i].numpy().tolist()
        assert got_words[:len(want_words)] == want_words and set(got_words[len(want_words):]) <= {IGNORE}
        want_labels = [labels[i][w] if w != IGNORE else IGNORE for w in want_words]
        assert piece_labels[i, :len(want_labels)].numpy().tolist() == want_labels
    assert truncated > 0                              # the length limit is exercised


def test_loss_ignores_the_other_pieces():
    """Keras' ignore_class averages over the labelled pieces only (PyTorch's ignore_index rule)."""
    task = TaggingTask("conll2003")
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 7, 9)).astype("float32")
    labels = rng.integers(-1, 9, size=(3, 7)).astype("int32")
    ours = float(task.compile_args()["loss"](labels, logits))
    flat, gold = logits.reshape(-1, 9), labels.reshape(-1)
    log_softmax = flat - np.log(np.exp(flat).sum(-1, keepdims=True))
    kept = gold != -1
    reference = -log_softmax[kept, gold[kept]].mean()
    assert kept.sum() < gold.size and abs(ours - reference) < 1e-5
