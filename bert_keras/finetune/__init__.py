"""Fine-tuning: one module per task kind reads raw-text examples, builds its task model and scores its
predictions with the official metric; trainer.py runs `model.fit` for all of them.

    text examples -> task model's text_dataset (its BertPreprocessor in tf.data) -> fit -> task.evaluate
"""

from bert_keras.finetune.registry import TASKS, get_task
from bert_keras.finetune.trainer import FinetuneConfig, finetune
from bert_keras.loading import load_backbone

__all__ = ["TASKS", "FinetuneConfig", "finetune", "get_task", "load_backbone"]
