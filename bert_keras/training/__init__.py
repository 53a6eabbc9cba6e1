"""Training parts shared by fine-tuning and pretraining: optimizers and schedules, distribution strategies."""

from bert_keras.training.optimizer import WarmupLinearDecay, create_optimizer
from bert_keras.training.strategy import create_strategy

__all__ = ["WarmupLinearDecay", "create_optimizer", "create_strategy"]
