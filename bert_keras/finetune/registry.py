"""The task names `bert-keras finetune --task` takes, and the kind of each. The task modules do not import this
file (no registration side effects, no import circle)."""

from __future__ import annotations

import inspect

from bert_keras.finetune.base import Task
from bert_keras.finetune.classification import ClassificationTask
from bert_keras.finetune.embedding import EmbeddingTask, RerankTask
from bert_keras.finetune.multiple_choice import MultipleChoiceTask
from bert_keras.finetune.squad import SquadTask
from bert_keras.finetune.tagging import TaggingTask

TASKS: dict[str, type] = {
    **{name: ClassificationTask for name in ("cola", "sst-2", "sst2", "mrpc", "qqp", "mnli", "qnli", "rte", "wnli",
                                             "sts-b", "stsb")},
    **{name: MultipleChoiceTask for name in ("swag", "openbookqa", "arc", "commonsenseqa", "multiple_choice")},
    **{name: SquadTask for name in ("squad", "squad_v1", "squad_v2")},
    **{name: TaggingTask for name in ("conll2003", "ner", "tagging")},
    "embedding": EmbeddingTask,
    "rerank": RerankTask,
}


def get_task(name: str, **kwargs) -> Task:
    """The task kind for a `--task` name (case-insensitive; see TASKS), built with `kwargs` (e.g. SQuAD's
    doc_stride); an unknown name raises ValueError listing the known ones."""
    key = name.strip().lower()
    if key not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}")
    known = set(inspect.signature(TASKS[key]).parameters) - {"name"}
    unknown = [k for k in kwargs if k not in known]
    if unknown:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in unknown)
        raise ValueError(f"{flags}: not an option of --task {key} (SQuAD's windows and answers: --task squad or "
                         f"squad_v2; --loss, --pooling, --mini-batch-size: --task embedding); drop it")
    return TASKS[key](key, **kwargs)
