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
    """Extractive question answering (SQuAD 1.1 and 2.0): the answer is a span of the context.

    One dense layer scores every token as the answer's start and end, as google-research/bert's run_squad.py;
    padding gets -10000 so it never wins a softmax. A long context becomes overlapping windows (`doc_stride`)
    and each token is scored in the window where it has the most context. `answer` and the export's `serve`
    decode the best span in-graph (run_squad.py's n-best rules, span_decoding.py). Arguments after
    `preprocessor` are keyword-only (five of them are ints).

    Args:
        encoder: BertEncoder. The backbone.
        preprocessor: BertPreprocessor or None. Needed for raw text; its `seq_length` or `max_seq_length` is
            the window length.
        doc_stride: int. Tokens between the starts of consecutive windows over a long context.
        max_query_length: int. Question tokens kept (the rest are cut).
        n_best_size: int. Start and end candidates considered per window.
        max_answer_length: int. Longest answer, in tokens.
        version_2: bool. SQuAD 2.0: answer "" when the null score beats the best span by more than
            `null_score_diff_threshold`.
        null_score_diff_threshold: float. See `version_2`.
        name: str or None. The Keras model name.

    Inputs and outputs:
        The id dict, each [W, S] int32 (W windows) -> {"start_logits", "end_logits"}: [W, S] float32.
        Raw text: (questions [B], contexts [B]); targets: (answer_start, answer_end) [B] character offsets into
        the context ([start, end), -1 for no answer).

    Example:
        >>> model = bert_keras.tasks.BertSpanLabeler(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")),
        ...     bert_keras.BertPreprocessor("vocab.txt", max_seq_length=32), doc_stride=8, max_query_length=8)
        >>> answers = model.answer(["Who wrote it?"], ["It was written by Ada Lovelace in 1843."])
        >>> sorted(answers[0]), answers[0]["text"] in "It was written by Ada Lovelace in 1843."
        (['end', 'score', 'start', 'text'], True)
    """

    def __init__(self, encoder, preprocessor=None, *, doc_stride: int = 128, max_query_length: int = 64,
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
        """[B] questions and contexts (and byte offsets of answers) -> squad_windows' dict: the id dict [W, S],
        "example_index" [W], token offsets, max-context flags and, with answers, start/end positions [W]."""
        a = self._task_args
        return squad_windows(self.require_preprocessor(), questions, contexts, doc_stride=a["doc_stride"],
                             max_query_length=a["max_query_length"], answer_start=answer_start,
                             answer_end=answer_end)

    def preprocess(self, x):
        """(questions [B], contexts [B]) -> the id dict of their windows, [W, S]."""
        w = self.windows(*x)
        return {k: w[k] for k in INPUT_NAMES}

    def prepare_targets(self, x, y):
        """(questions, contexts), (answer_start, answer_end) characters [B] -> (ids [W, S], token positions [W])."""
        questions, contexts = x
        start, end = (byte_offsets(contexts, v) for v in y)
        w = self.windows(questions, contexts, start, end)
        return {k: w[k] for k in INPUT_NAMES}, {"start_logits": w["start_positions"], "end_logits": w["end_positions"]}

    def batch(self, ds, batch_size, drop_remainder):
        """Questions are windowed QUESTIONS_PER_BATCH at a time; `after_preprocess` re-batches the windows."""
        return ds.batch(QUESTIONS_PER_BATCH)           # windows, not questions, are re-batched below

    def after_preprocess(self, ds, batch_size, training, seed, drop_remainder):
        """Training and evaluation: windows re-batched `batch_size` at a time (shuffled when training)."""
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
        """Answers raw questions about raw contexts, for people: `serve` (the export's decoding) in Python.

        Args:
            questions: list of str (or a [B] array); one str (with one context) is one example.
            contexts: list of str, one per question.

        Returns:
            One dict per question: {"text", "start", "end" (a [start, end) character span of the context),
            "score"}; "text" is "" and start/end -1 when there is no answer (SQuAD 2.0).

        Example:
            >>> model.answer(["Who wrote it?"], ["Ada Lovelace wrote it."])[0]["text"]      # doctest: +SKIP
            'Ada Lovelace'
        """
        return [{"text": t.decode("utf-8", errors="replace"), "start": int(s), "end": int(e), "score": float(sc)}
                for out in self.serve_batches(questions, contexts)
                for t, s, e, sc in zip(out["answer"], out["start"], out["end"], out["score"])]

