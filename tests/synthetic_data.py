"""Small synthetic training files in the real formats (an SST-2 TSV, a SQuAD v1.1 JSON, a CoNLL-2003 file), for tests that run the
fine-tuning pipeline end to end without ../shared. Deterministic: the same arguments give the same bytes."""

import json

import numpy as np

WORDS = ("river stone light music garden winter paper window market silver forest engine letter "
         "harbor candle bridge orange valley storm pencil").split()


def sst2_file(path, n=37):
    """`n` sentences of 3-7 WORDS plus their number, labels alternating 0/1, as SST-2's train.tsv -> path."""
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, size=3 + i % 5)) + f" {i}\t{i % 2}" for i in range(n)]
    path.write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    return path


def squad_file(path, questions=14):
    """`questions` one-question paragraphs of 30-105 WORDS (several windows at short lengths), each answered by
    the number word at its end, as a SQuAD v1.1 file -> path."""
    rng = np.random.default_rng(1)
    paragraphs = []
    for i in range(questions):
        context = " ".join(rng.choice(WORDS, size=30 + 25 * (i % 4))) + f" the answer is number{i} ."
        start = context.index(f"number{i}")
        paragraphs.append({"context": context, "qas": [{"id": f"q{i}", "question": f"what is {WORDS[i]} ?",
                                                        "answers": [{"text": f"number{i}", "answer_start": start}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    return path


TAGGING_WORDS = ["Ada", "Lovelace", "wrote", "notes", "in", "London", "for", "the", "Analytical", "Engine", "Babbage",
                 "Paris", "met", "a", "mathematician", "unbelievably", "Zürich", "on", "Monday", "."]


def conll_file(path, n: int = 40, seed: int = 0):
    """`n` CoNLL-2003 sentences (word POS chunk tag) of 2-14 TAGGING_WORDS with random IOB2 tags -> path."""
    from bert_keras.data import CONLL2003_LABELS
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(n):
        for _ in range(rng.integers(2, 15)):
            lines.append(f"{rng.choice(TAGGING_WORDS)} NN O {rng.choice(CONLL2003_LABELS)}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
