"""The readable methods (classify, answer, choose, entities, tag_words) and the fine-tuning tasks' evaluate run
batched in tf.data through one trace per input signature: a second call, a smaller last batch or another epoch's
evaluation does not trace again. Their answers, batch by batch, equal the model run on each example alone on the
ids of an independent tokenizer (HF tokenizers), or, where the decoding itself is the subject, on each example
as a batch of one."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.data.conll import TaggedSentence
from bert_keras.data.glue import TextExample
from bert_keras.data.multiple_choice import ChoiceExample
from bert_keras.data.squad import SquadExample
from bert_keras.finetune.classification import ClassificationTask
from bert_keras.finetune.multiple_choice import MultipleChoiceTask
from bert_keras.finetune.squad import SquadTask
from bert_keras.finetune.tagging import TaggingTask
from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger

TEXTS = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "ok",
         "Angela Merkel visited Zürich and New York in 2019 .", "!"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
MAX_LENGTH = 24


@pytest.fixture(scope="module")
def models(minilm_vocab):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=MAX_LENGTH)
    encoder = lambda: BertEncoder(PRESETS["bert_tiny"])  # noqa: E731
    built = {"sst2": BertClassifier(encoder(), 2, label_names=["negative", "positive"], preprocessor=pre),
             "squad": BertSpanLabeler(encoder(), pre, doc_stride=8, max_query_length=6),
             "swag": BertMultipleChoice(encoder(), preprocessor=pre),
             "ner": BertTagger(encoder(), label_names=TAGS, preprocessor=pre)}
    for model in built.values():
        model.predict_batch_size = 4                       # 6 examples: a full batch and a smaller last one
    return built


def hf_ids(hf_tokenizer, a, b=None, pretokenized=False):
    """One example's id dict [1, S] from HF tokenizers, truncated to MAX_LENGTH as ours is."""
    encoding = hf_tokenizer.encode(a, b, is_pretokenized=pretokenized) if b is not None else \
        hf_tokenizer.encode(a, is_pretokenized=pretokenized)
    ids, types = encoding.ids, encoding.type_ids
    if len(ids) > MAX_LENGTH:                                 # single segments only: keep [CLS] ... [SEP]
        ids, types = ids[:MAX_LENGTH - 1] + ids[-1:], types[:MAX_LENGTH]
    ids = np.array([ids], "int32")
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.array([types], "int32")}


def same_answers(got, want):
    """Readable answers equal but for float rounding (another batch pads to another length)."""
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], float):
                assert a[key] == pytest.approx(b[key], abs=1e-5)
            elif isinstance(a[key], dict):
                np.testing.assert_allclose(list(a[key].values()), list(b[key].values()), atol=1e-5)
            else:
                assert a[key] == b[key]


def tracing_count(model, method):
    return model.traced(method).experimental_get_tracing_count()


def test_classify_traces_once_and_equals_the_model_on_each_example(models, hf_tokenizer):
    model = models["sst2"]
    first, second = model.classify(TEXTS), model.classify(TEXTS[:3])
    assert tracing_count(model, "serve") == 1
    same_answers(second, first[:3])
    for text, row in zip(TEXTS, first):
        p = tf.nn.softmax(model(hf_ids(hf_tokenizer, text))).numpy()[0]
        np.testing.assert_allclose(list(row["probabilities"].values()), p, atol=1e-5)
        assert row["label"] == ["negative", "positive"][p.argmax()]


def test_choose_traces_once_and_equals_the_model_on_each_example(models, hf_tokenizer):
    model = models["swag"]
    contexts = TEXTS
    endings = [[t[::-1] + " a", t.upper() + " b", "x"] for t in TEXTS]
    first, second = model.choose(contexts, endings), model.choose(contexts[1:], endings[1:])
    assert tracing_count(model, "serve") == 1
    same_answers(second, first[1:])
    for context, row, got in zip(contexts, endings, first):
        pairs = [hf_ids(hf_tokenizer, context, e) for e in row]
        logits = [float(model({k: v[:, None] for k, v in ids.items()})[0, 0]) for ids in pairs]
        assert got["choice"] == int(np.argmax(logits)) and got["ending"] == row[got["choice"]]
        assert got["probability"] == pytest.approx(float(tf.nn.softmax(logits)[got["choice"]]), abs=1e-5)


def test_tag_words_traces_once_and_labels_each_words_first_piece(models, hf_tokenizer):
    model = models["ner"]
    sentences = [t.split() for t in TEXTS] + [[], ["tokenization"] * 30]     # no word; words past the length
    first = model.tag_words(sentences, batch_size=3)
    second = model.tag_words(sentences[2:], batch_size=3)
    assert tracing_count(model, "_word_label_ids") == 1
    assert second == first[2:]
    for words, labels in zip(sentences, first):
        assert len(labels) == len(words)
        if not words:
            continue
        encoding = hf_tokenizer.encode(words, is_pretokenized=True)
        best = model(hf_ids(hf_tokenizer, words, pretokenized=True)).numpy()[0].argmax(-1)
        want, seen = ["O"] * len(words), set()
        for position, word in enumerate(encoding.word_ids[:MAX_LENGTH - 1]):
            if word is not None and word not in seen:
                seen.add(word)
                want[word] = TAGS[best[position]]
        assert labels == want
    assert first[-1][-1] == "O"                                          # past the sequence length


def test_entities_and_answer_trace_once_and_do_not_depend_on_the_batch(models):
    ner, squad = models["ner"], models["squad"]
    batched = ner.entities(TEXTS)
    ner.entities(TEXTS[:1])
    assert tracing_count(ner, "serve") == 2 - 1
    assert batched == [ner.entities([t])[0] for t in TEXTS]
    questions = ["Who wrote it?", "Où ?", "when", "what", "which city", "?"]
    contexts = ["It was written by Ann Smith in 1990, in Zürich. " * 3, "Über", *TEXTS[2:]]
    answers = squad.answer(questions, contexts)
    squad.answer(questions[:2], contexts[:2])
    assert tracing_count(squad, "serve") == 1
    for q, c, a in zip(questions, contexts, answers):       # each question alone, eagerly
        alone = squad.answer_tensors(tf.constant([q]), tf.constant([c]))
        assert a["text"] == alone["answer"].numpy()[0].decode() == c[a["start"]:a["end"]]
        assert a["score"] == pytest.approx(float(alone["score"][0]), abs=1e-4)


def test_evaluate_twice_traces_once_per_task_kind(models):
    """Two epochs' evaluations with a last partial batch: each task kind traces its prediction function once,
    and its scores are those of the readable method (itself checked above) on the same examples."""
    sst2 = ClassificationTask("sst-2")
    sst2.label_names = ["negative", "positive"]
    examples = [TextExample(str(i), t, None, i % 2) for i, t in enumerate(TEXTS)]
    scores = [sst2.evaluate(models["sst2"], examples, batch_size=4) for _ in range(2)]
    predicted = [["negative", "positive"].index(r["label"]) for r in models["sst2"].classify(TEXTS)]
    assert scores[0] == scores[1]
    assert scores[0]["accuracy"] == pytest.approx(np.mean(np.equal(predicted, [i % 2 for i in range(6)])))

    choices = [ChoiceExample(str(i), t, (t[::-1], "x"), i % 2) for i, t in enumerate(TEXTS)]
    scores = [MultipleChoiceTask("swag").evaluate(models["swag"], choices, batch_size=4) for _ in range(2)]
    chosen = [r["choice"] for r in models["swag"].choose(TEXTS, [[t[::-1], "x"] for t in TEXTS])]
    assert scores[0] == scores[1]
    assert scores[0]["accuracy"] == pytest.approx(np.mean(np.equal(chosen, [i % 2 for i in range(6)])))

    sentences = [TaggedSentence(t.split(), ["O"] * len(t.split())) for t in TEXTS]
    tagging = TaggingTask("conll2003", TAGS)
    scores = [tagging.evaluate(models["ner"], sentences, batch_size=4) for _ in range(2)]
    assert scores[0] == scores[1]

    squad = SquadTask("squad")
    questions = [SquadExample(str(i), "what?", t, [(t[:2], 0)], False) for i, t in enumerate(TEXTS)]
    predictions = [squad.predict(models["squad"], questions, batch_size=4)[0] for _ in range(2)]
    assert predictions[0] == predictions[1] == {
        str(i): a["text"] for i, a in enumerate(models["squad"].answer(["what?"] * 6, TEXTS))}
    squad.evaluate(models["squad"], questions, batch_size=4)

    for model, method in [(models["sst2"], "serve"), (models["swag"], "serve"), (models["ner"], "_word_label_ids"),
                          (models["squad"], "answer_tensors")]:
        assert tracing_count(model, method) == 1, (model.name, method)
