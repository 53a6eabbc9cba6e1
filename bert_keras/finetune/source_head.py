"""`finetune --model <a Hugging Face task folder>`: the model built for the data starts from the folder's head when
that head fits the task, and from a new head (with a printed note saying why) when it does not.

A head fits when
  - its architecture is the task's model (BertForSequenceClassification for GLUE, BertForTokenClassification
    for CoNLL-2003, BertForQuestionAnswering for SQuAD, BertForMultipleChoice for SWAG & co.);
  - a classifier's kind is the data's: single-label for GLUE's classes, regression for STS-B's scores (a
    multi-label head does not fit single-label data);
  - a classifier's or tagger's id2label names are the data's label names, in any order (the head's outputs are
    reordered into the data's). transformers' default names (LABEL_0, LABEL_1, ...) are not matched by position
    to the data's: a new head is trained, and the note says to put the data's names in config.json's id2label
    to continue the folder's head.
The encoder is the folder's in every case.
"""

from __future__ import annotations

import numpy as np

from bert_keras.checkpoints.huggingface_tasks import MULTI_LABEL, REGRESSION, read_task_head
from bert_keras.tasks.huggingface import assign_head, is_huggingface_task_folder


def misfit(model, head) -> str | None:
    """Why a huggingface_tasks.TaskHead cannot start `model` (built for the data), or None when it can."""
    ours = type(model).__name__
    if head.names.task_class != ours:
        return f"it is a {head.names.architecture}, and this task trains a {ours}"
    if ours == "BertClassifier":
        if model.regression != (head.problem_type == REGRESSION):
            kinds = {True: "regression (one score)", False: "classification"}
            return f"its head is {kinds[head.problem_type == REGRESSION]}, the data's {kinds[model.regression]}"
        if head.problem_type == MULTI_LABEL and not model.multi_label:
            return "its head is multi-label (problem_type multi_label_classification), the data single-label"
        if model.regression:
            return None
    if ours in ("BertClassifier", "BertTagger") and sorted(head.label_names) != sorted(model.label_names):
        return (f"its labels ({', '.join(head.label_names)}) are not the data's ({', '.join(model.label_names)}); "
                "to continue its head, set id2label in its config.json to the data's names")
    return None


def start_from_source_head(model, source: str) -> str | None:
    """Gives `model` the head of the Hugging Face task folder `source` when it fits (see the module docstring).

    Args:
        model: the task model built for the data (BertClassifier, BertTagger, BertSpanLabeler, BertMultipleChoice).
        source: str. `finetune --model`'s source.

    Returns:
        str, the line to print (which head the run starts from, and why), or None when `source` is no Hugging
        Face task folder (the model keeps its new head, as for any encoder).

    Example:
        >>> note = start_from_source_head(model, "hf_sst2")     # a BertForSequenceClassification  # doctest: +SKIP
        >>> note                                                                                  # doctest: +SKIP
        'continuing the BertForSequenceClassification head of hf_sst2 (labels 0, 1)'
    """
    from bert_keras.storage import local_copy
    if hasattr(model, "start_from_source"):       # a model that reads its sources itself (finetune/embedding_model.py)
        return model.start_from_source(source)
    if not is_huggingface_task_folder(local_copy(source)):     # (a folder on a bucket: its local copy)
        return None
    head = read_task_head(local_copy(source))
    why = misfit(model, head)
    if why:
        return f"{source}: training a new {type(model).__name__} head on its encoder: {why}"
    labels = ""
    if head.label_names is not None and not getattr(model, "regression", False):
        order = [head.label_names.index(name) for name in model.label_names]     # the data's order
        head.kernel, head.bias = np.asarray(head.kernel)[:, order], np.asarray(head.bias)[order]
        head.label_names = list(model.label_names)
        labels = f" (labels {', '.join(model.label_names)})"
    assign_head(model, head, f"head of {source}")
    return f"continuing the {head.names.architecture} head of {source}{labels}"
