"""BertTagger on texts longer than the sequence length: `entities` and `serve` cut them into SQuAD's doc-stride
windows, label every piece once, from the window where it has the most context, and join entities across window
edges. The models are bert_tiny taggers whose layers pass the embeddings through (attention and feed-forward
outputs zero, the head reading one dimension per label), so each piece's label is set by a table the test writes:
by token id (the entities are then known from the text alone, and equal the same model's on short chunks around
each entity), or by the piece's column in its window (google-research's max-context rule, tests/squad_rules.py,
says which window). Tokens and offsets: HF tokenizers; entity grouping: seqeval."""

import numpy as np
import pytest
from seqeval.metrics.sequence_labeling import get_entities

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.data.conll import CONLL2003_LABELS as NAMES
from bert_keras.tasks import BertTagger
from squad_rules import google_doc_spans, google_is_max_context

SEQ = 32                                   # windows of 30 pieces; the default stride is half of that, 15
TOKEN_LABELS = {"john": "B-PER", "smith": "I-PER", "paris": "B-LOC", "zurich": "B-LOC", "united": "B-ORG",
                "nations": "I-ORG", "x": "B-MISC"}          # every other token: O ("x": the first piece of xylophones)
FILLER = ("the report said that a long meeting of the council was held on tuesday , and nothing was decided about "
          "it unbelievably").split()                                 # "unbelievably": five pieces
GROUPS = ["John Smith", "Paris", "United Nations", "Smith", "Zürich Paris", "Xylophones", "John Smith Smith",
          "United Nations Paris"]


def design(model, *, token_labels=None, column_labels=None):
    """Sets a bert_tiny tagger's weights so that the label of a piece is token_labels[id] (a dict; "O"
    elsewhere) or column_labels(column in its window); returns the model."""
    hidden = model.encoder.config.hidden_size
    eye = np.eye(hidden, dtype="float32")
    for w in model.weights:
        if w.path.endswith(("attention_output/kernel", "attention_output/bias", "/output/kernel", "/output/bias",
                            "token_type_embeddings/embeddings", "logits/bias")):
            w.assign(np.zeros(w.shape, "float32"))
        elif w.path.endswith("logits/kernel"):
            w.assign(eye[:, :len(NAMES)])                              # logit k reads dimension k
        elif w.path.endswith("word_embeddings/embeddings"):
            table = np.zeros(w.shape, "float32")
            if token_labels is not None:
                table[:, 0] = 1                                        # "O"
                for token, label in token_labels.items():
                    table[token] = eye[NAMES.index(label)]
            w.assign(table)
        elif w.path.endswith("position_embeddings/embeddings"):
            w.assign(np.stack([eye[column_labels(p)] for p in range(w.shape[0])]) if column_labels
                     else np.zeros(w.shape, "float32"))
    return model


def best_window(spans, position):
    return next(k for k in range(len(spans)) if google_is_max_context(spans, k, position))


@pytest.fixture(scope="module")
def pre(minilm_vocab):
    return BertPreprocessor(minilm_vocab, max_seq_length=SEQ)


@pytest.fixture(scope="module")
def tagger(pre):
    """One bert_tiny tagger (so one trace of `serve`): each test sets its weights with `design`."""
    return BertTagger(BertEncoder(PRESETS["bert_tiny"]), preprocessor=pre)


@pytest.fixture(scope="module")
def long_text():
    """~5,000 words: filler, with the GROUPS planted from word 300 on, each 8-20 filler words from the next.
    Returns (text, words, each word's start character)."""
    rng = np.random.default_rng(0)
    words = [FILLER[i] for i in rng.integers(0, len(FILLER), 300)]
    while len(words) < 5000:
        words += GROUPS[len(words) % len(GROUPS)].split()
        words += [FILLER[i] for i in rng.integers(0, len(FILLER), rng.integers(8, 21))]
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    return " ".join(words), words, starts


def test_a_5000_word_text_gets_every_entity_once_whole_across_window_edges(tagger, pre, long_text, hf_tokenizer):
    text, words, starts = long_text
    vocab = {token: i for i, token in enumerate(pre.vocab)}
    model = design(tagger, token_labels={vocab[token]: label for token, label in TOKEN_LABELS.items()})
    word_labels = [TOKEN_LABELS.get(e.tokens[0], "O")                                  # a word's first piece's
                   for e in hf_tokenizer.encode_batch(words, add_special_tokens=False)]
    want = [(starts[a], starts[b] + len(words[b]), kind, text[starts[a]:starts[b] + len(words[b])])
            for kind, a, b in get_entities(word_labels)]
    got = model.entities([text])[0]

    # Reference 1: the planted entities (seqeval's IOB2 grouping of the words' labels).
    assert got == want and len(want) > 250
    assert want[0][0] > 1000                                              # the first lies past the first window
    # Reference 2: the same model on short chunks around each entity (3 words each side; each fits one window).
    chunks, shifts = [], []
    for kind, a, b in get_entities(word_labels):
        lo, hi = max(a - 3, 0), min(b + 4, len(words))
        chunks.append(" ".join(words[lo:hi]))
        shifts.append(starts[lo])
        assert len(hf_tokenizer.encode(chunks[-1], add_special_tokens=False).ids) <= SEQ - 2
    union = sorted({(s + shift, e + shift, kind, t) for chunk, shift in zip(model.entities(chunks), shifts)
                    for s, e, kind, t in chunk})
    assert got == union

    # Every piece once, in order, with HF's tokens and offsets, labelled by its token.
    enc = hf_tokenizer.encode(text, add_special_tokens=False)
    out = model.serve_numpy([text, "Paris"])
    n = int(out["token_mask"][0].sum())
    assert n == len(enc.ids) and out["tokens"][0].tolist() == [t.encode() for t in enc.tokens]
    assert [tuple(o) for o in np.stack([out["start"][0], out["end"][0]], 1)] == enc.offsets
    assert [x.decode() for x in out["labels"][0][:n]] == [TOKEN_LABELS.get(t, "O") for t in enc.tokens]
    assert out["entity_text"][1, 0] == b"Paris" and out["token_mask"][1].sum() == 1

    # Some entities have their first and last pieces labelled in different windows (the edge between them).
    spans = google_doc_spans(len(enc.ids), SEQ - 2, model.doc_stride)
    piece_at = {start: i for i, (start, _) in enumerate(enc.offsets)}
    across = sum(best_window(spans, piece_at[s]) != best_window(spans, piece_at[text.rindex(" ", s, e) + 1])
                 for s, e, _, t in want if " " in t)
    assert len(spans) > 300 and across > 10


@pytest.mark.parametrize("doc_stride", [None, 7])
def test_each_piece_takes_its_label_from_its_max_context_window(tagger, pre, hf_tokenizer, doc_stride):
    """Labels by column: piece t of a long text is labelled as column 1 + t - (its max-context window's start).
    doc_stride 7 also goes through the config (with_preprocessor copies the model)."""
    model = design(tagger, column_labels=lambda column: column % len(NAMES))
    if doc_stride:
        model = model.with_preprocessor(pre, doc_stride=doc_stride)
    texts = [" ".join(FILLER * 12), "", "a short text , unbelievably", "Zürich " * 40]
    out = model.serve_numpy(texts)
    assert model.doc_stride == (doc_stride or (SEQ - 2) // 2)
    for row, text in enumerate(texts):
        enc = hf_tokenizer.encode(text, add_special_tokens=False)
        spans = google_doc_spans(len(enc.ids), SEQ - 2, model.doc_stride)
        want = [NAMES[(1 + t - spans[best_window(spans, t)][0]) % len(NAMES)] for t in range(len(enc.ids))]
        n = int(out["token_mask"][row].sum())
        assert n == len(enc.ids) and [x.decode() for x in out["labels"][row][:n]] == want, row
    assert len(google_doc_spans(len(hf_tokenizer.encode(texts[0]).ids), SEQ - 2, model.doc_stride)) > 5


def test_doc_stride_must_be_a_positive_int(tagger, pre):
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="doc_stride must be a positive number"):
            BertTagger(tagger.encoder, preprocessor=pre, doc_stride=bad)
