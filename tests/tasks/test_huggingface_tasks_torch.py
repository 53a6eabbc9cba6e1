"""Hugging Face task models both ways, against transformers itself.

From transformers: each of the four task classes (the sequence classifier three times: single-label,
multi-label, regression) is built seeded, fine-tuned a few steps (so its head is not at init) and saved as
transformers 5 saves (model.safetensors, config.json, tokenizer.json, tokenizer_config.json: no vocab.txt). We
open it three ways (`load_task_model`, `bert-keras convert --out x.keras`, `bert-keras export --model <folder>`),
export it for TF Serving, and run the exports on TF Serving's session path (one subprocess): the answers equal
transformers' pipelines on the same texts (text-classification scores within 1e-5, token-classification
entities), BertForMultipleChoice's logits within 1e-5, and the answer spans BertForQuestionAnswering's logits
give (transformers 5 removed the question-answering pipeline: its decoding is transcribed in `reference_answer`).
And back: a BertClassifier and a BertTagger we fine-tune, written by `bert-keras convert --hf-out`, give
transformers' pipelines our predictions (scores within 1e-5, the same entities)."""

import json
import os
import warnings

import numpy as np
import pytest

from bert_keras_cli.main import main
from session_path import run_signatures

pytestmark = pytest.mark.torch

HIDDEN = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=128)
TEXTS = ["a charming and often affecting journey .", "the plot is thin and the acting is worse",
         "an utterly gorgeous film", "dull , tedious and far too long", "Ünïcödé — “quoted” text",
         "I loved it"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
NER = [("Angela Merkel visited Paris last week .", "B-PER I-PER O B-LOC O O O"),
       ("John Smith lives in Berlin", "B-PER I-PER O O B-LOC"),
       ("Marie Curie worked in Warsaw and Paris .", "B-PER I-PER O O B-LOC O B-LOC O"),
       ("the weather in New York is cold", "O O O B-LOC I-LOC O O")]
NER_TEXTS = [s for s, _ in NER] + ["Angela Smith met John Curie in Berlin .", "nothing to see here"]
SQUAD = [("Who wrote the first program?", "Ada Lovelace wrote the first program in 1843 in London.", "Ada Lovelace"),
         ("When was it written?", "Ada Lovelace wrote the first program in 1843 in London.", "1843"),
         ("Where does John live?", "John Smith lives in Berlin with his two cats.", "Berlin"),
         ("What does John have?", "John Smith lives in Berlin with his two cats.", "two cats")]
CHOICES = [("She opened the door", ["and walked in.", "the sky is cheese.", "of seven."], 0),
           ("He picked up the guitar", ["purple runs quickly.", "and played a song.", "under the."], 1)]


def tokenizer(vocab):
    from transformers import BertTokenizerFast
    return BertTokenizerFast(vocab, do_lower_case=True, model_max_length=HIDDEN["max_position_embeddings"])


def train(model, batch: dict, steps: int = 15, lr: float = 3e-3) -> None:
    """A few AdamW steps on one batch, so the head (and encoder) move away from their initial weights."""
    import torch
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        model(**batch).loss.backward()
        optimizer.step()
    model.eval()


def token_labels(tok, sentences, tags) -> tuple:
    """Word tags -> per-token label ids (the first piece of each word; -100 elsewhere), as transformers' recipe."""
    import torch
    words = [s.split() for s in sentences]
    enc = tok(words, is_split_into_words=True, padding=True, return_tensors="pt")
    labels = []
    for row, row_tags in enumerate(tags):
        previous, ids = None, []
        for word in enc.word_ids(row):
            ids.append(-100 if word is None or word == previous else TAGS.index(row_tags.split()[word]))
            previous = word
        labels.append(ids)
    return enc, torch.tensor(labels)


def build_transformers_models(vocab, root) -> dict:
    """{name: folder} of six task models transformers builds, fine-tunes briefly and saves with its tokenizer."""
    import torch
    from transformers import (BertConfig, BertForMultipleChoice, BertForQuestionAnswering,
                              BertForSequenceClassification, BertForTokenClassification)
    tok = tokenizer(vocab)
    folders = {}

    def save(name, model):
        folder = str(root / name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        assert not os.path.exists(os.path.join(folder, "vocab.txt"))          # transformers 5's layout
        folders[name] = folder

    enc = tok(TEXTS, padding=True, return_tensors="pt")
    torch.manual_seed(0)
    single = BertForSequenceClassification(BertConfig(**HIDDEN, num_labels=2))  # id2label: LABEL_0, LABEL_1
    train(single, {**enc, "labels": torch.tensor([1, 0, 1, 0, 1, 1])})
    save("single", single)
    torch.manual_seed(1)
    names = ["joy", "anger", "surprise"]
    multi = BertForSequenceClassification(BertConfig(
        **HIDDEN, num_labels=3, problem_type="multi_label_classification",
        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}))
    targets = torch.tensor([[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]], dtype=torch.float)
    train(multi, {**enc, "labels": targets})
    save("multi", multi)
    torch.manual_seed(2)
    regression = BertForSequenceClassification(BertConfig(**HIDDEN, num_labels=1, problem_type="regression"))
    train(regression, {**enc, "labels": torch.tensor([4.5, 1.0, 4.8, 0.5, 2.5, 4.0])})
    save("regression", regression)

    torch.manual_seed(3)
    tagger = BertForTokenClassification(BertConfig(
        **HIDDEN, num_labels=len(TAGS), id2label=dict(enumerate(TAGS)), label2id={t: i for i, t in enumerate(TAGS)}))
    enc, labels = token_labels(tok, [s for s, _ in NER], [t for _, t in NER])
    train(tagger, {**enc, "labels": labels}, steps=40)
    save("tagger", tagger)

    torch.manual_seed(4)
    qa = BertForQuestionAnswering(BertConfig(**HIDDEN))
    enc = tok([q for q, _, _ in SQUAD], [c for _, c, _ in SQUAD], padding=True, return_tensors="pt")
    starts, ends = [], []
    for row, (_, context, answer) in enumerate(SQUAD):
        at = context.index(answer)
        starts.append(enc.char_to_token(row, at, sequence_index=1))
        ends.append(enc.char_to_token(row, at + len(answer) - 1, sequence_index=1))
    train(qa, {**enc, "start_positions": torch.tensor(starts), "end_positions": torch.tensor(ends)}, steps=40)
    save("qa", qa)

    torch.manual_seed(5)
    choice = BertForMultipleChoice(BertConfig(**HIDDEN))
    train(choice, {**choice_inputs(tok, CHOICES), "labels": torch.tensor([c for _, _, c in CHOICES])})
    save("choice", choice)
    return folders


def choice_inputs(tok, examples) -> dict:
    """[B, C, S] tensors of (context, ending) pairs, as transformers' multiple-choice recipe."""
    contexts = [c for c, endings, _ in examples for _ in endings]
    endings = [e for _, row, _ in examples for e in row]
    enc = tok(contexts, endings, padding=True, return_tensors="pt")
    return {k: v.view(len(examples), -1, v.shape[-1]) for k, v in enc.items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm_vocab):
    """The six transformers models, opened by us three ways, exported, and answered on the session path."""
    from bert_keras.tasks import load_task_model
    from savedmodels.export import export_for_serving
    root = tmp_path_factory.mktemp("hf_tasks")
    folders = build_transformers_models(minilm_vocab, root)
    base = str(root / "serving")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        models = {name: load_task_model(folders[name]) for name in ("single", "multi", "regression", "qa")}
    assert not [w for w in caught if "pooler" in str(w.message)]     # BertForQuestionAnswering has none: quietly
    # The reference searches every start and end (run_squad.py keeps the 20 best of each): so does ours here.
    models["qa"] = models["qa"].with_preprocessor(models["qa"].preprocessor, n_best_size=128)
    assert main(["convert", "--checkpoint", folders["tagger"], "--out", str(root / "tagger.keras")]) == 0
    models["tagger"] = load_task_model(str(root / "tagger.keras"))
    paths = {name: export_for_serving(model, base, name).version for name, model in models.items()}
    assert main(["export", "--model", folders["choice"], "--base-path", base, "--name", "choice"]) == 0
    paths["choice"] = os.path.join(base, "choice", "1")
    calls = {
        **{name: {"inputs": {"text": TEXTS}} for name in ("single", "multi", "regression")},
        "tagger": {"inputs": {"text": NER_TEXTS}},
        "qa": {"inputs": {"question": [q for q, _, _ in SQUAD], "context": [c for _, c, _ in SQUAD]}},
        "choice": {"inputs": {"context": [c for c, _, _ in CHOICES], "endings": [e for _, e, _ in CHOICES]}},
    }
    answers = run_signatures([{"path": paths[name], "signature": "serving_default", **call}
                              for name, call in calls.items()])
    return folders, models, dict(zip(calls, answers))


def pipeline(task, folder, **kwargs):
    from transformers import pipeline as make
    return make(task, model=folder, tokenizer=folder, device="cpu", **kwargs)


def scores_by_label(results) -> list[dict]:
    return [{r["label"]: r["score"] for r in row} for row in results]


@pytest.mark.parametrize("name", ["single", "multi", "regression"])
def test_sequence_classification_scores_equal_the_pipeline(served, name):
    folders, models, answers = served
    theirs = scores_by_label(pipeline("text-classification", folders[name], top_k=None)(TEXTS))
    labels = models[name].label_names
    config = json.load(open(os.path.join(folders[name], "config.json")))
    id2label = config.get("id2label") or {}          # transformers 5 leaves out the default LABEL_0, LABEL_1
    assert labels == [id2label.get(str(i), f"LABEL_{i}") for i in range(len(labels))]   # kept as they are
    assert name != "single" or labels == ["LABEL_0", "LABEL_1"]
    out = answers[name]
    ours = ([{labels[0]: s} for s in out["score"]] if name == "regression"
            else [dict(zip(labels, row)) for row in out["probabilities"]])
    assert [sorted(o) for o in ours] == [sorted(t) for t in theirs]
    np.testing.assert_allclose([[o[k] for k in sorted(o)] for o in ours], [[t[k] for k in sorted(t)] for t in theirs],
                               atol=1e-5, rtol=0)
    if name == "multi":                 # every label over 0.5, and the scores spread around it
        assert out["labels"] == [[n if p > 0.5 else "" for n, p in zip(labels, row)] for row in out["probabilities"]]
        assert 0 < sum(map(sum, out["selected"])) < len(TEXTS) * len(labels)
    if name == "single":
        assert out["label"] == [max(t, key=t.get) for t in theirs]


def test_token_classification_entities_equal_the_pipeline(served):
    folders, _, answers = served
    theirs = pipeline("token-classification", folders["tagger"], aggregation_strategy="first")(NER_TEXTS)
    out = answers["tagger"]
    ours = [[(s, e, t, x) for s, e, t, x in zip(*row) if s >= 0] for row in
            zip(out["entity_start"], out["entity_end"], out["entity_type"], out["entity_text"])]
    want = [[(r["start"], r["end"], r["entity_group"], text[r["start"]:r["end"]]) for r in row]
            for text, row in zip(NER_TEXTS, theirs)]
    assert ours == want
    assert sum(map(len, want)) >= 4                       # the fine-tuned tagger finds entities


def reference_answer(model, tok, question, context, max_answer_len=30) -> tuple:
    """transformers 4's question-answering pipeline on one window, transcribed: the model's start and end logits,
    the best start + end over pairs of context tokens with start <= end and at most `max_answer_len` tokens
    (the pipeline's product of softmaxes has the same argmax in one window), the answer as the context's
    characters from the start token's first to the end token's last. -> (text, start, end)."""
    import torch
    enc = tok(question, context, return_offsets_mapping=True, return_tensors="pt")
    offsets = enc.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        out = model(**enc)
    start, end = out.start_logits[0].numpy(), out.end_logits[0].numpy()
    context_tokens = [i for i, s in enumerate(enc.sequence_ids(0)) if s == 1]
    pairs = [(i, j) for i in context_tokens for j in context_tokens if 0 <= j - i < max_answer_len]
    i, j = max(pairs, key=lambda p: start[p[0]] + end[p[1]])
    s, e = offsets[i][0], offsets[j][1]
    return context[s:e], s, e


def test_question_answering_spans_equal_transformers(served, minilm_vocab):
    from transformers import AutoModelForQuestionAnswering
    folders, _, answers = served
    model = AutoModelForQuestionAnswering.from_pretrained(folders["qa"]).eval()
    theirs = [reference_answer(model, tokenizer(minilm_vocab), q, c) for q, c, _ in SQUAD]
    out = answers["qa"]
    assert list(zip(out["answer"], out["start"], out["end"])) == theirs
    assert sum(a == want for a, (_, _, want) in zip(out["answer"], SQUAD)) >= 2     # it learnt something


def test_multiple_choice_logits_equal_the_model(served, minilm_vocab):
    import torch
    from transformers import AutoModelForMultipleChoice
    folders, _, answers = served
    model = AutoModelForMultipleChoice.from_pretrained(folders["choice"]).eval()
    with torch.no_grad():
        theirs = model(**choice_inputs(tokenizer(minilm_vocab), CHOICES)).logits.numpy()
    np.testing.assert_allclose(answers["choice"]["logits"], theirs, atol=1e-5, rtol=0)


# ---- and back: ours, fine-tuned here, as transformers folders ---------------------------------------------------

@pytest.fixture(scope="module")
def ours_in_transformers(tmp_path_factory, minilm_vocab):
    """A tiny BertClassifier and BertTagger fine-tuned a few steps, saved, and written by convert --hf-out."""
    import keras

    from bert_keras import BertConfig, BertEncoder, BertPreprocessor
    from bert_keras.tasks import BertClassifier, BertTagger
    root = tmp_path_factory.mktemp("ours")
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    config = BertConfig(vocab_size=30522, **HIDDEN)
    classifier = BertClassifier(BertEncoder(config), 2, label_names=["negative", "positive"], preprocessor=pre)
    classifier.compile(optimizer=keras.optimizers.AdamW(3e-3),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    classifier.fit(TEXTS, np.array([1, 0, 1, 0, 1, 1]), epochs=10, batch_size=6, verbose=0)
    tagger = BertTagger(BertEncoder(config), label_names=TAGS, preprocessor=pre)
    tagger.encoder.pooler.trainable = False                  # as finetune does: the tagger never reads it
    tagger.compile(optimizer=keras.optimizers.AdamW(3e-3),
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1))
    tagger.fit([s.split() for s, _ in NER], [t.split() for _, t in NER], epochs=40, batch_size=4, verbose=0)
    folders = {}
    for name, model in (("classifier", classifier), ("tagger", tagger)):
        model.with_preprocessor(model.preprocessor).save(root / f"{name}.keras")     # as finetune: no optimizer
        folders[name] = str(root / f"hf_{name}")
        assert main(["convert", "--checkpoint", str(root / f"{name}.keras"), "--hf-out", folders[name]]) == 0
    return folders, classifier, tagger


def test_our_classifier_in_transformers_pipeline(ours_in_transformers):
    folders, classifier, _ = ours_in_transformers
    assert sorted(os.listdir(folders["classifier"])) == ["config.json", "model.safetensors", "tokenizer.json",
                                                         "tokenizer_config.json", "vocab.txt"]
    theirs = scores_by_label(pipeline("text-classification", folders["classifier"], top_k=None)(TEXTS))
    ours = [r["probabilities"] for r in classifier.classify(TEXTS)]
    assert [sorted(t) for t in theirs] == [sorted(o) for o in ours]
    np.testing.assert_allclose([[t[k] for k in sorted(t)] for t in theirs], [[o[k] for k in sorted(o)] for o in ours],
                               atol=1e-5, rtol=0)


def test_our_tagger_in_transformers_pipeline(ours_in_transformers):
    folders, _, tagger = ours_in_transformers
    theirs = pipeline("token-classification", folders["tagger"], aggregation_strategy="first")(NER_TEXTS)
    ours = tagger.entities(NER_TEXTS)
    assert [[(r["start"], r["end"], r["entity_group"]) for r in row] for row in theirs] == \
        [[(s, e, t) for s, e, t, _ in row] for row in ours]
    assert sum(map(len, ours)) >= 4
