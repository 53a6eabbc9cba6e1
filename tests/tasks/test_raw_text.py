"""Task models own their preprocessor: one `.keras` takes raw text in fit/predict/evaluate, reopens in a fresh
process with safe_mode, answers in words through the same `serve` the export runs; text never enters the compiled
train step. References: HF tokenizers' ids for the preprocessing, seqeval's chunking (bert_keras.metrics.tagging,
itself checked against seqeval's numbers) for the entities."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger, load_task_model
from conftest import REPO

TEXTS = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "ok"]
LABELS = np.array([1, 0, 1, 0] * 4, "int32")
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
CE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def hf_ids(hf_tokenizer, a, b=None):
    """The id dict of HF tokenizers for texts (or pairs), padded to the longest: the independent reference."""
    hf_tokenizer.enable_padding(pad_id=0)
    encodings = hf_tokenizer.encode_batch(list(a) if b is None else list(zip(a, b)))
    hf_tokenizer.no_padding()
    return {"input_word_ids": np.array([e.ids for e in encodings], "int32"),
            "input_mask": np.array([e.attention_mask for e in encodings], "int32"),
            "input_type_ids": np.array([e.type_ids for e in encodings], "int32")}


@pytest.fixture(scope="module")
def models(minilm_vocab):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    encoder = lambda: BertEncoder(PRESETS["bert_tiny"])  # noqa: E731
    return {"sst2": BertClassifier(encoder(), 2, label_names=["negative", "positive"], preprocessor=pre),
            "mrpc": BertClassifier(encoder(), 2, preprocessor=pre, segments=2),
            "squad": BertSpanLabeler(encoder(), pre, doc_stride=16, max_query_length=8),
            "swag": BertMultipleChoice(encoder(), preprocessor=pre),
            "ner": BertTagger(encoder(), label_names=TAGS, preprocessor=pre)}


def test_predict_on_text_equals_the_model_on_reference_ids(models, hf_tokenizer):
    close = lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)  # noqa: E731
    # The per-batch padded length is a multiple of 8; HF pads to the longest: compare on the real tokens.
    got = models["sst2"].predict(TEXTS, batch_size=2, verbose=0)
    close(got, models["sst2"](hf_ids(hf_tokenizer, TEXTS)))
    got = models["mrpc"].predict((TEXTS, TEXTS[::-1]), verbose=0)
    close(got, models["mrpc"](hf_ids(hf_tokenizer, TEXTS, TEXTS[::-1])))
    contexts, endings = ["A man sits at a piano.", "x"], [["He plays.", "He eats it."], ["", "y"]]
    got = models["swag"].predict((contexts, endings), verbose=0)
    pairs = hf_ids(hf_tokenizer, [c for c in contexts for _ in range(2)], [e for row in endings for e in row])
    close(got, models["swag"]({k: v.reshape(2, 2, -1) for k, v in pairs.items()}))
    sentences = ["Angela Merkel visited Zürich .", "ok"]
    got = models["ner"].predict(sentences, verbose=0)
    ids = hf_ids(hf_tokenizer, sentences)
    want = models["ner"](ids).numpy()
    mask = ids["input_mask"].astype(bool)
    close(got[:, :want.shape[1]][mask], want[mask])
    # SQuAD: windows over the context; each window's logits, in order, for the (question, context) pairs.
    windows = models["squad"].predict((["Who wrote it?"], ["It was written by Ann Smith in 1990. " * 12]), verbose=0)
    assert windows["start_logits"].shape[0] > 1


def test_fit_and_evaluate_take_text_arrays_and_datasets_and_keep_text_out_of_the_step(models, minilm_vocab):
    from tpu_compile import train_step_problems
    keras.utils.set_random_seed(1)
    pre = BertPreprocessor(minilm_vocab, seq_length=32, max_seq_length=32)
    model = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, preprocessor=pre)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=CE, metrics=["accuracy"], jit_compile=True)
    texts = TEXTS * 4
    first = model.evaluate(texts, LABELS, verbose=0)[0]
    model.fit(texts, LABELS, batch_size=4, epochs=8, verbose=0)
    assert train_step_problems(model) == []            # static ids only: no strings, no TF.Text op, XLA step
    model.fit(tf.data.Dataset.from_tensor_slices((texts, LABELS)).batch(4), epochs=2, verbose=0)
    loss, accuracy = model.evaluate(tf.data.Dataset.from_tensor_slices((texts, LABELS)).batch(4), verbose=0)
    assert loss < first - 0.3 and accuracy == 1.0
    # The other kinds: targets in their own terms (answer character spans, ending index, word labels).
    for name, x, y in [
        ("squad", (["Who wrote it?"] * 4, ["It was written by Ann Smith in 1990."] * 4), ([18] * 4, [27] * 4)),
        ("swag", (["A man sits at a piano."] * 4, [["He plays.", "He eats it."]] * 4), np.zeros(4, "int32")),
        ("ner", [["Angela", "Merkel", "visited", "Paris", "."]] * 4, [["B-PER", "I-PER", "O", "B-LOC", "O"]] * 4),
    ]:
        m = models[name]
        loss = {"start_logits": CE, "end_logits": CE} if name == "squad" else (
            keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1) if name == "ner" else CE)
        m.compile(optimizer=keras.optimizers.Adam(3e-3), loss=loss)
        before = m.evaluate(x, y, verbose=0)
        m.fit(x, y, batch_size=4, epochs=4, verbose=0)
        after = m.evaluate(x, y, verbose=0)
        assert np.ravel(after)[0] < 0.8 * np.ravel(before)[0], name         # it learns from these targets


def test_readable_answers_are_the_serving_decoding(models, hf_tokenizer):
    out = models["sst2"].classify(TEXTS)
    probabilities = tf.nn.softmax(models["sst2"](hf_ids(hf_tokenizer, TEXTS))).numpy()
    for row, p in zip(out, probabilities):
        assert row["label"] == ["negative", "positive"][p.argmax()]
        np.testing.assert_allclose(list(row["probabilities"].values()), p, atol=1e-5)
    questions, contexts = ["Who wrote it?", "Où ?"], ["It was written by Ann Smith in 1990, in Zürich. " * 4, "Über"]
    answers = models["squad"].answer(questions, contexts)
    want = models["squad"].answer_tensors(tf.constant(questions), tf.constant(contexts))
    for a, context, text in zip(answers, contexts, want["answer"].numpy()):
        assert a["text"] == text.decode() == context[a["start"]:a["end"]]
    from bert_keras.data.squad import SquadExample
    from bert_keras.finetune.squad import SquadTask
    examples = [SquadExample(str(i), q, c, [], False) for i, (q, c) in enumerate(zip(questions, contexts))]
    for _ in range(3):                                    # as an evaluation every epoch: one trace, kept
        predicted, _ = SquadTask("squad").predict(models["squad"], examples, batch_size=2)
        assert predicted == {str(i): a["text"] for i, a in enumerate(answers)}
    assert models["squad"].traced("answer_tensors").experimental_get_tracing_count() == 1
    choices = models["swag"].choose(["A man sits at a piano."], [["He plays.", "He eats it."]])
    logits = models["swag"].predict((["A man sits at a piano."], [["He plays.", "He eats it."]]), verbose=0)
    assert choices[0]["ending"] == ["He plays.", "He eats it."][logits[0].argmax()]


@pytest.mark.parametrize("seed", range(6))
def test_entities_follow_seqeval_chunking(minilm_vocab, seed):
    """Random word labels (malformed sequences included) on words that split into several pieces: the in-graph
    spans are seqeval's chunks, mapped to the words' characters."""
    from bert_keras.metrics.tagging import get_entities
    from bert_keras.tasks.tagger import entity_spans
    rng = np.random.default_rng(seed)
    pre = BertPreprocessor(minilm_vocab)
    lexicon = ["Zürich", "tokenization", "Merkel", "Paris", "unbelievably", "a", "New", "York", ",", "Öl"]
    sentences = [[str(w) for w in rng.choice(lexicon, rng.integers(1, 9))] for _ in range(5)] + [[]]
    texts = [" ".join(words) for words in sentences]
    ids, starts, ends = pre.tokenize_with_offsets(tf.constant(texts))
    # Label every piece at random; a word's label is its first piece's (pre-split words: BERT splits none here).
    word_labels, piece_labels = [], []
    for row_ids in ids.to_list():
        pieces = [pre.vocab[i] for i in row_ids]
        labels = [str(rng.choice(TAGS + ["B-ORG", "I-ORG"])) for _ in pieces]
        piece_labels.append(labels)
        word_labels.append([l for l, p in zip(labels, pieces) if not p.startswith("##")])
    out = entity_spans(tf.constant(texts), ids, starts, ends, tf.ragged.constant(piece_labels, tf.string), pre)
    out = {k: v.numpy() for k, v in out.items()}
    for row, (words, labels, text) in enumerate(zip(sentences, word_labels, texts)):
        assert len(labels) == len(words)
        spans, position = [], 0
        for w in words:
            spans.append((position, position + len(w)))
            position += len(w) + 1
        want = [(spans[a][0], spans[b][1], kind, text[spans[a][0]:spans[b][1]])
                for kind, a, b in get_entities(labels)]
        got = [(int(s), int(e), t.decode(), x.decode()) for s, e, t, x in zip(
            out["entity_start"][row], out["entity_end"][row], out["entity_type"][row], out["entity_text"][row])
            if s >= 0]
        assert got == want


def test_one_keras_file_reopens_in_a_fresh_process_and_answers(models, tmp_path):
    paths = {}
    for name, model in models.items():
        paths[name] = str(tmp_path / f"{name}.keras")
        model.save(paths[name])
    script = f"""
import json, keras, bert_keras
p = {paths!r}
m = {{k: keras.models.load_model(v, safe_mode=True) for k, v in p.items()}}
print(json.dumps({{
    "sst2": m["sst2"].classify(["a fine film"])[0]["label"],
    "mrpc": m["mrpc"].predict((["a"], ["b"]), verbose=0).shape[1],
    "squad": m["squad"].answer(["Who?"], ["Ann Smith wrote it."])[0]["text"],
    "swag": m["swag"].choose(["A man"], [["sits.", "eats."]])[0]["ending"],
    "ner": len(m["ner"].entities(["Angela Merkel visited Paris ."])),
}}))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["sst2"] == models["sst2"].classify(["a fine film"])[0]["label"]
    assert got["mrpc"] == 2
    assert got["squad"] == models["squad"].answer(["Who?"], ["Ann Smith wrote it."])[0]["text"]
    assert got["swag"] == models["swag"].choose(["A man"], [["sits.", "eats."]])[0]["ending"]
    assert got["ner"] == len(models["ner"].entities(["Angela Merkel visited Paris ."]))


def test_a_model_of_the_previous_layout_is_upgraded_or_refused_by_name(models, minilm_vocab, tmp_path):
    """Before this version a finetune folder held an ids-only model.keras with vocab.txt, preprocessing.json and
    task.json beside it."""
    old = tmp_path / "old"
    old.mkdir()
    sst2 = models["sst2"]
    ids_only = BertClassifier.from_config({k: v for k, v in sst2.get_config().items() if k != "preprocessor"})
    ids_only.set_weights(sst2.get_weights())
    ids_only.save(old / "model.keras")
    with pytest.raises(ValueError, match="has no preprocessor.*load_task_model"):
        keras.models.load_model(old / "model.keras").predict(["text"], verbose=0)
    with pytest.raises(ValueError, match="no vocab.txt \\+ preprocessing.json beside it"):
        load_task_model(str(old))
    (old / "vocab.txt").write_text(open(minilm_vocab, encoding="utf-8").read(), encoding="utf-8")
    (old / "preprocessing.json").write_text(json.dumps({"lower_case": True, "max_seq_length": 64}))
    (old / "task.json").write_text(json.dumps({"task": "sst-2", "segments": 1}))
    upgraded = load_task_model(str(old))
    np.testing.assert_allclose(upgraded.predict(TEXTS, verbose=0), sst2.predict(TEXTS, verbose=0), atol=1e-6)
    assert upgraded.classify(["x"])[0]["label"] in ("negative", "positive")


def test_a_bare_string_is_one_example_not_a_list_of_characters(models):
    """Issue 55: `classify("a string")` ran once per character (15 results), `entities("John")` returned 4 lists.
    A str is one example (a list of one result, as fill_mask and transformers' pipelines answer); lists of
    different lengths, or a str beside a list, are refused."""
    text, question, context = "a gorgeous film", "who wrote it?", "Ada Lovelace wrote it ."
    assert models["sst2"].classify(text) == models["sst2"].classify([text])
    assert len(models["sst2"].classify(text)) == 1
    assert models["ner"].entities("John") == models["ner"].entities(["John"])
    assert len(models["ner"].entities("John")) == 1
    assert models["squad"].answer(question, context) == models["squad"].answer([question], [context])
    endings = ["and walked in .", "of cheese ."]
    assert models["swag"].choose("She opened the door", endings) == models["swag"].choose(
        ["She opened the door"], [endings])
    with pytest.raises(ValueError, match="different numbers of examples"):
        models["squad"].answer([question, question], [context])
    with pytest.raises(ValueError, match="single string stands beside a list"):
        models["squad"].answer([question], context)
