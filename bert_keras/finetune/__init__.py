"""Fine-tuning: one module per task kind turns raw-text examples into batches for its task model and its
predictions into the official metric; trainer.py runs `model.fit` for all of them.

    text examples -> task.dataset (BertPreprocessor in tf.data) -> task model -> task.evaluate (official metric)
"""

from bert_keras.finetune.base import TASKS, get_task
from bert_keras.finetune.trainer import FinetuneConfig, finetune, load_backbone

__all__ = ["TASKS", "FinetuneConfig", "finetune", "get_task", "load_backbone"]
