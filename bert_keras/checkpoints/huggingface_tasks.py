"""Hugging Face BERT task folders <-> our task models: the architectures, their heads' weight names, the labels.

A transformers task model saves its encoder under `bert.` (huggingface.py maps those names) and one Linear head:

| transformers architecture       | its head (torch [out, in])   | our task model     | our head (Keras Dense [in, out]) |
|---------------------------------|------------------------------|--------------------|----------------------------------|
| BertForSequenceClassification   | classifier.{weight,bias} [C] | BertClassifier     | logits [H, C]                    |
| BertForTokenClassification      | classifier.{weight,bias} [K] | BertTagger         | logits [H, K]                    |
| BertForQuestionAnswering        | qa_outputs.{weight,bias} [2] | BertSpanLabeler    | span_logits [H, 2] (start, end)  |
| BertForMultipleChoice           | classifier.{weight,bias} [1] | BertMultipleChoice | choice_score [H, 1]              |

The token and span models have no pooler (transformers builds them with add_pooling_layer=False). Labels are
config.json's `id2label` in id order (transformers' default names "LABEL_0", ... are kept as they are). A sequence
classifier's kind is its `problem_type`: single_label_classification (softmax), multi_label_classification
(sigmoid, every label over 0.5), regression (one output); without one, one label is regression and more are
single-label (transformers' losses read it so). This file holds names only: the encoder's are huggingface.py's,
and bert_keras/tasks/huggingface.py builds the task models.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from bert_keras.config import check_bert_architecture

SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label_classification", "multi_label_classification", "regression"


@dataclasses.dataclass(frozen=True)
class HeadNames:
    """One task kind's names: transformers' architecture and head module, our task model class and head layer."""
    architecture: str          # transformers' class, config.json's `architectures`
    module: str                # the torch Linear holding the head (`<module>.weight`, `<module>.bias`)
    task_class: str            # our task model class
    layer: str                 # our head's Dense layer
    pooler: bool               # does transformers' model have the pooler


HEADS = (
    HeadNames("BertForSequenceClassification", "classifier", "BertClassifier", "logits", pooler=True),
    HeadNames("BertForTokenClassification", "classifier", "BertTagger", "logits", pooler=False),
    HeadNames("BertForQuestionAnswering", "qa_outputs", "BertSpanLabeler", "span_logits", pooler=False),
    HeadNames("BertForMultipleChoice", "classifier", "BertMultipleChoice", "choice_score", pooler=True),
)
BY_ARCHITECTURE = {h.architecture: h for h in HEADS}
BY_TASK_CLASS = {h.task_class: h for h in HEADS}
HEAD_WEIGHTS = frozenset(f"{h.module}.{part}" for h in HEADS for part in ("weight", "bias"))


def is_head_weight(hf_name: str) -> bool:
    """Is this Hugging Face weight name a task head's (`classifier.weight`, `qa_outputs.bias`, ...)?"""
    return hf_name in HEAD_WEIGHTS


@dataclasses.dataclass
class TaskHead:
    """A task head in our layout, with what config.json says about it.

    Attributes:
        names: HeadNames. Which architecture and which of our task models.
        kernel: NumPy array [H, out] (Keras' Dense layout).
        bias: NumPy array [out].
        label_names: list of str or None. id2label in id order (classifier and tagger; None for the others).
        problem_type: str or None. A sequence classifier's: SINGLE_LABEL, MULTI_LABEL or REGRESSION.
        dropout: float. The dropout before the head (config.json's classifier_dropout, else hidden_dropout_prob).
    """
    names: HeadNames
    kernel: np.ndarray
    bias: np.ndarray
    label_names: list | None = None
    problem_type: str | None = None
    dropout: float = 0.1

    def huggingface_weights(self) -> dict:
        """{Hugging Face name: array in torch's layout}: the head's entries of model.safetensors."""
        return {f"{self.names.module}.weight": np.ascontiguousarray(np.asarray(self.kernel).T),
                f"{self.names.module}.bias": np.ascontiguousarray(np.asarray(self.bias))}

    def config_entries(self) -> dict:
        """config.json's entries for this head: architectures, num_labels, id2label/label2id, problem_type,
        classifier_dropout."""
        outputs = int(np.shape(self.bias)[0])
        if self.names.architecture == "BertForMultipleChoice":
            outputs = 2                                    # transformers' default num_labels: unused by the head
        labels = list(self.label_names) if self.label_names else [f"LABEL_{i}" for i in range(outputs)]
        entries = {"architectures": [self.names.architecture], "num_labels": len(labels),
                   "id2label": {str(i): name for i, name in enumerate(labels)},
                   "label2id": {name: i for i, name in enumerate(labels)},
                   "classifier_dropout": float(self.dropout)}
        if self.problem_type:
            entries["problem_type"] = self.problem_type
        return entries


def read_config(folder: str) -> dict:
    """config.json of a Hugging Face folder as a dict ({} when there is none); another architecture's (RoBERTa,
    GPT-2, ...) is a ValueError (config.check_bert_architecture)."""
    path = os.path.join(folder, "config.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds a JSON {type(values).__name__}, not a config object: give the folder's "
                         "own config.json")
    check_bert_architecture(values, path)
    return values


def task_names(folder: str) -> HeadNames | None:
    """The HeadNames of a Hugging Face task folder (config.json's `architectures` + model.safetensors), or None
    for any other source (a BertModel or BertForMaskedLM folder, a TF checkpoint, a file)."""
    if not (os.path.isdir(folder) and os.path.exists(os.path.join(folder, "model.safetensors"))):
        return None
    found = [BY_ARCHITECTURE[a] for a in read_config(folder).get("architectures") or [] if a in BY_ARCHITECTURE]
    return found[0] if found else None


def problem_type(config: dict) -> str:
    """A sequence classifier's kind from its config.json: `problem_type`, else regression for one label."""
    kind = config.get("problem_type")
    if kind in (SINGLE_LABEL, MULTI_LABEL, REGRESSION):
        return kind
    if kind is not None:
        raise ValueError(f"problem_type {kind!r} is none of {SINGLE_LABEL}, {MULTI_LABEL}, {REGRESSION}")
    return REGRESSION if _num_labels(config) == 1 else SINGLE_LABEL


def _num_labels(config: dict) -> int:
    return len(config["id2label"]) if config.get("id2label") else int(config.get("num_labels", 2))


def read_task_head(folder: str) -> TaskHead:
    """The task head of a Hugging Face task folder, in our layout, with its labels and kind.

    Args:
        folder: str. A folder transformers' `save_pretrained` wrote for one of the four architectures (HEADS).

    Returns:
        TaskHead (kernel [H, out], bias [out], labels from id2label, problem_type, dropout).

    Raises:
        ValueError: the folder is no task folder, its head weights are missing, or id2label does not match them.

    Example:
        >>> head = read_task_head("hf_sst2")           # a BertForSequenceClassification folder  # doctest: +SKIP
        >>> head.names.task_class, head.kernel.shape, head.label_names                       # doctest: +SKIP
        ('BertClassifier', (384, 2), ['NEGATIVE', 'POSITIVE'])
    """
    from safetensors import safe_open
    names = task_names(folder)
    if names is None:
        raise ValueError(f"{folder} is no Hugging Face task folder: its config.json names none of "
                         f"{', '.join(BY_ARCHITECTURE)}")
    path = os.path.join(folder, "model.safetensors")
    with safe_open(path, framework="numpy") as f:
        keys = set(f.keys())
        missing = [f"{names.module}.{p}" for p in ("weight", "bias") if f"{names.module}.{p}" not in keys]
        if missing:
            raise ValueError(f"{path} has no {', '.join(missing)}: a {names.architecture} saves its head there")
        weight, bias = f.get_tensor(f"{names.module}.weight"), f.get_tensor(f"{names.module}.bias")
    config = read_config(folder)
    dropout = config.get("classifier_dropout")
    head = TaskHead(names, weight.T, bias, dropout=float(config.get("hidden_dropout_prob", 0.1)
                                                         if dropout is None else dropout))
    if names.task_class in ("BertClassifier", "BertTagger"):
        id2label = config.get("id2label") or {}
        head.label_names = [id2label.get(str(i), id2label.get(i, f"LABEL_{i}")) for i in range(len(bias))]
        if id2label and len(id2label) != len(bias):
            raise ValueError(f"{folder}/config.json has {len(id2label)} labels in id2label for a head of "
                             f"{len(bias)} outputs")
    if names.task_class == "BertClassifier":
        head.problem_type = problem_type({**config, "id2label": config.get("id2label") or
                                          {str(i): n for i, n in enumerate(head.label_names)}})
        if head.problem_type == REGRESSION and len(bias) != 1:
            raise ValueError(f"{folder}: problem_type regression with {len(bias)} outputs (we take one score)")
    return head
