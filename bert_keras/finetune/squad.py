"""SQuAD v1.1 / v2.0 span extraction: (question, context) -> the answer's span in the context.

Features: preprocessing/windows.py (doc stride, max-context rule, training positions). Answers:
tasks/span_decoding.py (n-best candidates, max answer length, the v2.0 null rule), their text cut from the
original context through the tokenizer's byte offsets: no second tokenizer, no detokenizing heuristics.
Loss: mean of start and end cross-entropy (google-research). Metric: the official EM/F1 (v2.0 with best-threshold).
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from bert_keras.data import read_squad
from bert_keras.finetune.base import Task, register
from bert_keras.metrics.squad import squad_v1_scores, squad_v2_scores
from bert_keras.preprocessing.windows import squad_windows
from bert_keras.tasks import BertSpanLabeler
from bert_keras.tasks.span_decoding import answer_text, best_spans

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


class SquadAnswerer:
    """Raw (questions, contexts) [B] strings -> answers, in one graph: windows -> span model -> best spans.

    Returns {"answer": [B] strings, "start", "end": [B] int64 byte offsets into the context, "score",
    "null_score", "null_odds", "start_logits", "end_logits" ([W, L], per window), "example_index" [W]}.
    """

    def __init__(self, model, preprocessor, doc_stride=128, max_query_length=64, n_best_size=20,
                 max_answer_length=30, version_2=False, null_score_diff_threshold=0.0):
        self.model, self.preprocessor = model, preprocessor
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.n_best_size, self.max_answer_length = n_best_size, max_answer_length
        self.version_2, self.threshold = version_2, null_score_diff_threshold

    def __call__(self, questions, contexts) -> dict:
        windows = squad_windows(self.preprocessor, questions, contexts, self.doc_stride, self.max_query_length)
        logits = self.model({k: windows[k] for k in MODEL_INPUTS}, training=False)
        spans = best_spans(logits["start_logits"], logits["end_logits"], windows, tf.shape(questions)[0],
                           self.n_best_size, self.max_answer_length)
        answer = answer_text(contexts, spans["start"], spans["end"])
        if self.version_2:
            empty = spans["null_odds"] > self.threshold
            answer = tf.where(empty, "", answer)
            spans["start"] = tf.where(empty, -1, spans["start"])
            spans["end"] = tf.where(empty, -1, spans["end"])
        return dict(spans, answer=answer, start_logits=logits["start_logits"], end_logits=logits["end_logits"],
                    example_index=windows["example_index"])


def answer_bytes(example) -> tuple[int, int]:
    """The first answer's [start, end) in UTF-8 bytes of the context; (-1, -1) for an impossible question."""
    if example.is_impossible or not example.answers:
        return -1, -1
    text, start = example.answers[0]
    begin = len(example.context[:start].encode("utf-8"))
    return begin, begin + len(text.encode("utf-8"))


def as_squad_dataset(examples) -> dict:
    """Examples -> the SQuAD JSON structure the official metric reads."""
    return {"data": [{"paragraphs": [{"context": e.context, "qas": [
        {"id": e.qid, "question": e.question,
         "answers": [{"text": t, "answer_start": s} for t, s in e.answers] if not e.is_impossible else []}]}]}
        for e in examples]}


@register("squad", "squad_v1", "squad_v2")
class SquadTask(Task):
    default_files = ("train-v1.1.json", "dev-v1.1.json")

    def __init__(self, name: str, doc_stride: int = 128, max_query_length: int = 64, n_best_size: int = 20,
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
        examples = read_squad(path)
        if any(e.is_impossible for e in examples) and not self.version_2:
            raise ValueError(f"{path} has unanswerable questions (SQuAD 2.0): use --task squad_v2")
        return examples

    def build_model(self, encoder, examples):
        return BertSpanLabeler(encoder)

    def export_args(self):
        return {"doc_stride": self.doc_stride, "max_query_length": self.max_query_length,
                "n_best_size": self.n_best_size, "max_answer_length": self.max_answer_length,
                "version_2": self.version_2, "null_score_diff_threshold": self.threshold}

    def dataset(self, examples, preprocessor, batch_size, training, seed=0):
        spans = np.array([answer_bytes(e) for e in examples], "int64").reshape(-1, 2)
        ds = tf.data.Dataset.from_tensor_slices(([e.question for e in examples], [e.context for e in examples],
                                                 spans[:, 0], spans[:, 1]))
        if training:
            ds = ds.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)

        def features(q, c, s, e):
            w = squad_windows(preprocessor, q, c, self.doc_stride, self.max_query_length, s, e)
            return ({k: w[k] for k in MODEL_INPUTS},
                    {"start_logits": w["start_positions"], "end_logits": w["end_positions"]})

        # Windows, not questions, are the training examples: make them per batch of questions, then re-batch.
        ds = ds.batch(64).map(features, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
        if training:
            ds = ds.shuffle(4 * batch_size, seed=seed)
        pad = {"input_word_ids": preprocessor.pad_id, "input_mask": 0, "input_type_ids": 0}
        ds = ds.padded_batch(batch_size, padding_values=(pad, {"start_logits": 0, "end_logits": 0}),
                             drop_remainder=training)
        return ds.prefetch(tf.data.AUTOTUNE)

    def compile_args(self):
        ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"loss": {"start_logits": ce, "end_logits": ce},
                "loss_weights": {"start_logits": 0.5, "end_logits": 0.5}, "metrics": []}

    def answerer(self, model, preprocessor) -> SquadAnswerer:
        return SquadAnswerer(model, preprocessor, self.doc_stride, self.max_query_length, self.n_best_size,
                             self.max_answer_length, self.version_2, self.threshold)

    def predict(self, model, examples, preprocessor, batch_size) -> tuple[dict, dict]:
        """({qid: answer text}, {qid: null odds})."""
        answer = tf.function(self.answerer(model, preprocessor), reduce_retracing=True)
        predictions, null_odds = {}, {}
        for i in range(0, len(examples), batch_size):
            chunk = examples[i:i + batch_size]
            out = answer(tf.constant([e.question for e in chunk]), tf.constant([e.context for e in chunk]))
            for e, text, odds in zip(chunk, out["answer"].numpy(), out["null_odds"].numpy()):
                predictions[e.qid] = text.decode("utf-8", errors="replace")
                null_odds[e.qid] = float(odds)
        return predictions, null_odds

    def evaluate(self, model, examples, preprocessor, batch_size):
        predictions, null_odds = self.predict(model, examples, preprocessor, batch_size)
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
