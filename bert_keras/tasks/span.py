"""SQuAD span extraction: a dense layer scores every token as answer start and end (google-research run_squad.py).

Inputs: the id dict ([B, S]). Outputs: {"start_logits": [B, S], "end_logits": [B, S]} float32, -10000 at padding.
Raw text: (questions [B], contexts [B]); each question becomes one or more windows over its context
(preprocessing/windows.py: doc stride, max-context rule). Targets: (answer_start, answer_end) [B] character
offsets into the context ([start, end), -1 for no answer). `answer()` gives the answers (span_decoding.py).

Padding is masked out of the softmax over positions (google-research leaves it in, but always pads to 384):
with per-batch padding its logits would make the loss and the n-best depend on the other windows in the batch.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_keras.encoder import INPUT_NAMES
from bert_keras.layers import padding_bias
from bert_keras.preprocessing.offsets import byte_offsets, char_offsets
from bert_keras.preprocessing.windows import squad_windows
from bert_keras.tasks.base import TaskModel, dense_head, id_inputs
from bert_keras.tasks.span_decoding import answer_text, best_spans

QUESTIONS_PER_BATCH = 64        # questions windowed at a time in tf.data, before the windows are re-batched


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSpanLabeler(TaskModel):
    def __init__(self, encoder, preprocessor=None, doc_stride: int = 128, max_query_length: int = 64,
                 n_best_size: int = 20, max_answer_length: int = 30, version_2: bool = False,
                 null_score_diff_threshold: float = 0.0, name=None):
        inputs = id_inputs()
        logits = dense_head(2, encoder.config.initializer_range, "span_logits")(encoder(inputs)["sequence_output"])
        padding = padding_bias(inputs["input_mask"])                                              # [B, S]
        outputs = {"start_logits": logits[:, :, 0] + padding, "end_logits": logits[:, :, 1] + padding}
        super().__init__(inputs, outputs, encoder, preprocessor, name=name, doc_stride=doc_stride,
                         max_query_length=max_query_length, n_best_size=n_best_size,
                         max_answer_length=max_answer_length, version_2=version_2,
                         null_score_diff_threshold=null_score_diff_threshold)

    def windows(self, questions, contexts, answer_start=None, answer_end=None) -> dict:
        a = self._task_args
        return squad_windows(self.require_preprocessor(), questions, contexts, a["doc_stride"],
                             a["max_query_length"], answer_start, answer_end)

    def preprocess(self, x):
        w = self.windows(*x)
        return {k: w[k] for k in INPUT_NAMES}

    def prepare_targets(self, x, y):
        questions, contexts = x
        start, end = (byte_offsets(contexts, v) for v in y)
        w = self.windows(questions, contexts, start, end)
        return {k: w[k] for k in INPUT_NAMES}, {"start_logits": w["start_positions"], "end_logits": w["end_positions"]}

    def batch(self, ds, batch_size, drop_remainder):
        return ds.batch(QUESTIONS_PER_BATCH)           # windows, not questions, are re-batched below

    def after_preprocess(self, ds, batch_size, training, seed, drop_remainder):
        if not isinstance(ds.element_spec, tuple):    # prediction: each batch of questions' windows, in order
            return ds
        ds = ds.unbatch()
        if training:
            ds = ds.shuffle(4 * batch_size, seed=seed)
        pad = {"input_word_ids": self.preprocessor.pad_id, "input_mask": 0, "input_type_ids": 0}
        return ds.padded_batch(batch_size, padding_values=(pad, {"start_logits": 0, "end_logits": 0}),
                               drop_remainder=drop_remainder)

    def answer_tensors(self, questions, contexts) -> dict:
        """[B] questions and contexts -> {"answer" [B] string, "start", "end" [B] int64 byte offsets ([start,
        end), -1 for none), "score", "null_score", "null_odds" [B], "start_logits", "end_logits" [W, L],
        "example_index" [W]}; SQuAD 2.0 (`version_2`): no answer when null_odds > the threshold."""
        a = self._task_args
        windows = self.windows(questions, contexts)
        logits = self.inference({k: windows[k] for k in INPUT_NAMES})
        spans = best_spans(logits["start_logits"], logits["end_logits"], windows, tf.shape(questions)[0],
                           a["n_best_size"], a["max_answer_length"])
        answer = answer_text(contexts, spans["start"], spans["end"])
        if a["version_2"]:
            empty = spans["null_odds"] > a["null_score_diff_threshold"]
            answer = tf.where(empty, "", answer)
            spans["start"] = tf.where(empty, -1, spans["start"])
            spans["end"] = tf.where(empty, -1, spans["end"])
        return dict(spans, answer=answer, start_logits=tf.cast(logits["start_logits"], tf.float32),
                    end_logits=tf.cast(logits["end_logits"], tf.float32), example_index=windows["example_index"])

    def serve(self, question, context) -> dict:
        """The serving answer: text, [start, end) in characters of the context (-1 for none), scores, logits."""
        out = self.answer_tensors(question, context)
        offsets = char_offsets(context, tf.stack([out["start"], out["end"]], 1))
        return {"answer": out["answer"], "start": offsets[:, 0], "end": offsets[:, 1], "score": out["score"],
                "null_score": out["null_score"], "start_logits": out["start_logits"],
                "end_logits": out["end_logits"], "window_example": out["example_index"]}

    def answer(self, questions, contexts) -> list[dict]:
        """For people: [{"text", "start", "end" (characters of the context), "score"}] per question; "text" is
        "" and start/end -1 when there is no answer (SQuAD 2.0)."""
        out = self.serve_numpy(questions, contexts)
        return [{"text": t.decode("utf-8", errors="replace"), "start": int(s), "end": int(e), "score": float(sc)}
                for t, s, e, sc in zip(out["answer"], out["start"], out["end"], out["score"])]

