"""Training parts shared by fine-tuning and pretraining: their common settings (config.py), the run's set-up
(setup.py: strategy, seed, precision, output folder, compile, fit), callbacks, optimizers and schedules,
distribution strategies and input pipelines."""

from bert_keras.training.callbacks import EpochEvaluation, EpochTimer, TrainingCurves
from bert_keras.training.config import TrainingConfig
from bert_keras.training.optimizer import WarmupLinearDecay, create_optimizer
from bert_keras.training.strategy import create_strategy

__all__ = ["EpochEvaluation", "EpochTimer", "TrainingConfig", "TrainingCurves", "WarmupLinearDecay",
           "create_optimizer", "create_strategy"]
