"""SQuAD v1.1 / v2.0 span extraction: (question, context) -> the answer's span in the context.

Windows, answers and the v2.0 null rule belong to the task model (tasks/span.py: preprocessing/windows.py and
tasks/span_decoding.py); answer text is cut from the original context through the tokenizer's byte offsets: no
second tokenizer, no detokenizing heuristics. Loss: mean of start and end cross-entropy (google-research).
Metric: the official EM/F1 (v2.0 with best-threshold).
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from bert_keras.data import DataFormatError, answerable_for_training, read_squad
from bert_keras.finetune.base import Task, some_examples
from bert_keras.metrics.squad import squad_v1_scores, squad_v2_scores
from bert_keras.tasks import BertSpanLabeler


def answer_chars(example) -> tuple[int, int]:
    """The first answer's [start, end) in characters of the context; (-1, -1) for an impossible question."""
    if example.is_impossible or not example.answers:
        return -1, -1
    text, start = example.answers[0]
    return start, start + len(text)


def as_squad_dataset(examples) -> dict:
    """Examples -> the SQuAD JSON structure the official metric reads."""
    return {"data": [{"paragraphs": [{"context": e.context, "qas": [
        {"id": e.qid, "question": e.question,
         "answers": [{"text": t, "answer_start": s} for t, s in e.answers] if not e.is_impossible else []}]}]}
        for e in examples]}


class SquadTask(Task):
    """SQuAD 1.1 and 2.0: a BertSpanLabeler, the official exact-match and F1 (2.0: with no-answer thresholds).

    The window and answer settings after `name` are keyword-only (they are BertSpanLabeler's, all numbers).
    """

    default_files = ("train-v1.1.json", "dev-v1.1.json")
    uses_pooler = False

    def __init__(self, name: str, *, doc_stride: int = 128, max_query_length: int = 64, n_best_size: int = 20,
                 max_answer_length: int = 30, null_score_diff_threshold: float = 0.0):
        self.name = name
        self.version_2 = name == "squad_v2"
        self.metric_name = "f1"
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.n_best_size, self.max_answer_length = n_best_size, max_answer_length
        self.threshold = null_score_diff_threshold
        if self.version_2:
            self.default_files = ("train-v2.0.json", "dev-v2.0.json")

    def read(self, path):
        examples = some_examples(read_squad(path), path, "no questions in its data list")
        if any(e.is_impossible for e in examples) and not self.version_2:
            raise ValueError(f"{path} has unanswerable questions (SQuAD 2.0): use --task squad_v2")
        return examples

    def read_training(self, path):
        """`read`'s questions as google-research run_squad trains on them (data/squad.py: answerable_for_training):
        a question whose first answer is not at its `answer_start` is skipped, one whose `answer_start` falls
        inside the words of its answer trains on its answer's text there; one line says how many of each. A file
        where no answered question passes is refused. (Evaluation reads every question as written: the official
        metric compares answer texts, not offsets.)"""
        examples = self.read(path)
        kept, skipped, moved = answerable_for_training(examples)
        if not skipped and not moved:
            return examples
        answered = sum(not e.is_impossible for e in examples)
        moved_note = (f"{len(moved):,} answer(s) found a few characters from their answer_start are trained where "
                      "their text is" if moved else "")
        if not skipped:
            print(f"{path}: {moved_note} (google-research run_squad's rule)", flush=True)
            return kept
        first = skipped[0]
        text, start = first.answers[0]
        shown = text if len(text) <= 40 else text[:37] + "..."
        where = (f"the first, id {first.qid}: {shown!r} at answer_start {start:,} of a {len(first.context):,}-"
                 "character context")
        if len(skipped) == answered:
            raise DataFormatError(path, None, f"none of its {answered:,} answers is at its answer_start ({where}): "
                                              "answer_start must be the character offset of the answer's text in "
                                              "its context")
        print(f"skipped {len(skipped):,} of {len(examples):,} training questions in {path}: the text at their "
              f"answer_start is not their answer (google-research run_squad's check; {where})"
              + (f"; {moved_note}" if moved else ""), flush=True)
        return kept

    def min_seq_length(self):
        """A window holds [CLS], the question cut to max_query_length tokens, [SEP], then at least one context
        token and [SEP] (run_squad.py's windows: max_seq_length - question - 3 context tokens)."""
        q = self.max_query_length
        return q + 4, (f"[CLS], up to --max-query-length {q} question tokens, [SEP], a context token, [SEP]; or "
                       "lower --max-query-length")

    def build_model(self, encoder, preprocessor, examples):
        return BertSpanLabeler(encoder, preprocessor, doc_stride=self.doc_stride,
                               max_query_length=self.max_query_length, n_best_size=self.n_best_size,
                               max_answer_length=self.max_answer_length, version_2=self.version_2,
                               null_score_diff_threshold=self.threshold)

    def inputs(self, examples):
        spans = np.array([answer_chars(e) for e in examples], "int64").reshape(-1, 2)
        return ([e.question for e in examples], [e.context for e in examples]), (spans[:, 0], spans[:, 1])

    def training_sequences(self, examples, model) -> int:
        """The windows of every question's context (what SQuAD trains on), counted in chunks of 256 questions."""
        (questions, contexts), _ = self.inputs(examples)
        return sum(int(tf.size(model.windows(tf.constant(questions[i:i + 256]),
                                             tf.constant(contexts[i:i + 256]))["example_index"]))
                   for i in range(0, len(questions), 256))

    def compile_args(self):
        ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"loss": {"start_logits": ce, "end_logits": ce},
                "loss_weights": {"start_logits": 0.5, "end_logits": 0.5}, "metrics": []}

    def predict(self, model, examples, batch_size) -> tuple[dict, dict]:
        """({qid: answer text}, {qid: null odds})."""
        predictions, null_odds = {}, {}
        answers = model.batched("answer_tensors", [e.question for e in examples], [e.context for e in examples],
                                batch_size=batch_size)
        texts, odds = [], []
        for out in answers:
            texts += out["answer"].tolist()
            odds += out["null_odds"].tolist()
        for e, text, o in zip(examples, texts, odds):
            predictions[e.qid] = text.decode("utf-8", errors="replace")
            null_odds[e.qid] = float(o)
        return predictions, null_odds

    def evaluate(self, model, examples, batch_size):
        predictions, null_odds = self.predict(model, examples, batch_size)
        self.last_predictions = {"predictions.json": predictions, **({"null_odds.json": null_odds}
                                                                      if self.version_2 else {})}
        dataset = as_squad_dataset(examples)
        if self.version_2:
            return squad_v2_scores(dataset, predictions, null_odds)
        return squad_v1_scores(dataset, predictions)

    def write_predictions(self, folder: str) -> None:
        """predictions.json ({question id: answer text}, the official scripts' input) and, for v2.0,
        null_odds.json, from the last evaluation."""
        from bert_keras.atomic import write_json
        for name, value in getattr(self, "last_predictions", {}).items():
            write_json(os.path.join(folder, name), value, ensure_ascii=False)
