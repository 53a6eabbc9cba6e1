"""LiteRTModel: runs a `bert-keras export --format litert` file, with the task models' readable methods.

    model = LiteRTModel("sst2.tflite")                  # needs the [litert] extra: ai-edge-litert
    model.classify(["a gorgeous film"])    # [{"label": "1", "probability": 0.97, "probabilities": {...}}]
    model.serve(text=["a gorgeous film"])  # the serving_default tensors, as NumPy

Runs on `ai_edge_litert.interpreter.InterpreterWithCustomOps` with TF.Text's TFLite kernels
(`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`); XNNPACK runs the encoder. A single text goes to a
classifier's one-text signature (`serving_one`, see savedmodels/litert.py), anything else to serving_default.
The methods answer as BertClassifier.classify, BertSpanLabeler.answer, BertMultipleChoice.choose and
BertTagger.entities do; the two substrings the file cannot cut (a span's answer, an entity's text) are cut here
from the character offsets.
"""

from __future__ import annotations

import json

import numpy as np

METADATA = "bert_keras"


def read_metadata(path: str) -> dict:
    """The export's metadata (kind, inputs, label names, precision) from a .tflite file."""
    from tensorflow.lite.python import schema_py_generated as schema
    with open(path, "rb") as f:
        buf = f.read()
    model = schema.Model.GetRootAsModel(buf, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() and entry.Name().decode() == METADATA:
            return json.loads(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes())
    raise ValueError(f"{path} holds no bert_keras metadata: it was not written by `bert-keras export --format litert`")


class LiteRTModel:
    """A LiteRT export, ready to answer.

    Args:
        path: the `.tflite` written by `bert-keras export --format litert`.
        num_threads: interpreter threads (None: LiteRT's default).

    Example:
        >>> LiteRTModel("sst2.tflite").classify(["a gorgeous film"])            # doctest: +SKIP
    """

    def __init__(self, path: str, num_threads: int | None = None):
        try:
            from ai_edge_litert.interpreter import InterpreterWithCustomOps
        except ImportError as error:
            raise ImportError("LiteRTModel needs ai-edge-litert: pip install 'bert-keras[litert]'") from error
        import tensorflow_text as tf_text
        self.meta = read_metadata(path)
        self.interpreter = InterpreterWithCustomOps(
            model_path=path, custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
            num_threads=num_threads)
        self.runner = self.interpreter.get_signature_runner("serving_default")
        one = self.meta.get("one_text_signature")        # a classifier's batch-of-one signature (litert.convert)
        self.one_text_runner = self.interpreter.get_signature_runner(one) if one else None
        self.kind = self.meta["kind"]
        self._shapes = {}

    def serve(self, **inputs) -> dict:
        """serving_default on NumPy/Python strings -> its output tensors as NumPy. (One text goes to the file's
        one-text signature where it has one: the same outputs, faster.)"""
        feeds = {}
        for name in self.meta["inputs"]:
            value = np.asarray(inputs[name], dtype=object)
            feeds[name] = np.vectorize(lambda s: s.encode("utf-8") if isinstance(s, str) else s,
                                       otypes=[object])(value) if value.size else value.astype(bytes)
        one = self.one_text_runner and all(v.shape == (1,) for v in feeds.values())
        out = self._run(self.one_text_runner if one else self.runner, feeds)
        if self.kind == "span":           # no valid span: the file holds float32's lowest (no -inf constant
            low = np.finfo(np.float32).min    # survives conversion); the SavedModel says -inf
            out["score"] = np.where(out["score"] <= low, -np.inf, out["score"]).astype(np.float32)
        return out

    def _run(self, runner, feeds: dict) -> dict:
        """runner(**feeds), without LiteRT's per-call resize and AllocateTensors when the input shapes are the
        previous call's. (A SignatureRunner call re-prepares every op, as string inputs are dynamic tensors: about
        5% of a one-sentence call. The ops whose output shapes follow the text resize themselves in Invoke.)"""
        shapes = {name: value.shape for name, value in feeds.items()}
        if self._shapes.get(id(runner)) != shapes:
            out = runner(**feeds)
            self._shapes[id(runner)] = shapes
            return out
        wrapper, subgraph = runner._interpreter_wrapper, runner._subgraph_index
        for name, value in feeds.items():
            wrapper.SetTensor(runner._inputs[name], value, subgraph)
        wrapper.Invoke(subgraph)
        return {name: wrapper.GetTensor(index, subgraph) for name, index in runner._outputs}

    def _require(self, kind: str) -> None:
        if self.kind != kind:
            raise TypeError(f"this LiteRT model is a {self.kind} model, not {kind}")

    def classify(self, texts, texts_b=None) -> list[dict]:
        """As BertClassifier.classify: [{"label", "probability", "probabilities"}] (regression: [{"score"}])."""
        self._require("classification")
        inputs = ({"text": texts} if texts_b is None else {"text_a": texts, "text_b": texts_b})
        out = self.serve(**inputs)
        if self.meta["regression"]:
            return [{"score": float(s)} for s in out["score"]]
        names = self.meta["label_names"]
        return [{"label": label.decode(), "probability": float(p.max()), "probabilities": dict(zip(names, map(float, p)))}
                for label, p in zip(out["label"], out["probabilities"])]

    def choose(self, contexts, endings) -> list[dict]:
        """As BertMultipleChoice.choose: [{"choice", "ending", "probability"}] per context."""
        self._require("multiple_choice")
        out = self.serve(context=contexts, endings=endings)
        return [{"choice": int(i), "ending": e.decode(), "probability": float(p[i])}
                for i, e, p in zip(out["prediction"], out["ending"], out["probabilities"])]

    def answer(self, questions, contexts) -> list[dict]:
        """As BertSpanLabeler.answer: [{"text", "start", "end", "score"}] ("" and -1 for no answer)."""
        self._require("span")
        out = self.serve(question=questions, context=contexts)
        return [{"text": c[s:e] if s >= 0 else "", "start": int(s), "end": int(e), "score": float(sc)}
                for c, s, e, sc in zip(contexts, out["start"], out["end"], out["score"])]

    def entities(self, texts) -> list[list[tuple[int, int, str, str]]]:
        """As BertTagger.entities: per text, (start, end, type, text) with [start, end) in characters."""
        self._require("tagging")
        out = self.serve(text=texts)
        return [[(int(s), int(e), kind.decode(), text[s:e]) for s, e, kind in zip(*row) if s >= 0]
                for text, *row in zip(texts, out["entity_start"], out["entity_end"], out["entity_type"])]
