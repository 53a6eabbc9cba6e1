"""The settings every training run shares: fine-tuning (`FinetuneConfig`) and pretraining (`PretrainConfig`)
extend `TrainingConfig` with their own (the task and its data; the records and the step count)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(kw_only=True)
class TrainingConfig:
    """Hardware, precision, batch, optimizer and logging settings of a training run (keyword-only).

    Args:
        vocab: vocab.txt, when the model source has none beside it (e.g. a preset name).
        lower_case: lower-case and strip accents; None reads it from the vocabulary (uncased vocabularies have
            no capitals).
        batch_size: global batch size (divided over the replicas).
        learning_rate: the peak learning rate, after warm-up.
        weight_decay: AdamW's decoupled weight decay (not on LayerNorm parameters or biases).
        schedule: the learning rate's decay after warm-up: "google" (google-research/bert: peak * (1 - step /
            total)) or "linear" (transformers' get_linear_schedule_with_warmup: from the peak down to 0).
        adam_epsilon: Adam's epsilon (1e-6 in google-research/bert, 1e-8 in transformers).
        max_seq_length: the longest sequence in tokens.
        mixed_precision: a Keras policy, "mixed_bfloat16" (TPU) or "mixed_float16" (GPU); None: float32.
        jit_compile: compile the train step with XLA.
        steps_per_execution: training steps per call into the compiled step (TPUs: e.g. 100).
        strategy: "auto", "tpu", "mirrored", "multi_worker" or "cpu" (bert_keras.training.create_strategy); on
            the JAX backend "auto" (data parallel over every JAX device), "tpu" or "cpu" (data_parallel.py).
        backend: the Keras backend the run needs ("tensorflow" or "jax"); None: whichever this process runs
            (KERAS_BACKEND, fixed when Keras is imported). The run records the one it used.
        tpu: a Cloud TPU name or grpc://host:8470; None: $TPU_NAME, else this TPU VM's own TPU.
        seed: seeds Python, NumPy and TensorFlow (weights of new layers, shuffling, dropout).
        progress: a progress bar (True) or one line per epoch.
        log_every: TensorBoard gets the training loss and the learning rate every this many steps.

    Example:
        >>> from bert_keras.finetune import FinetuneConfig
        >>> FinetuneConfig(task="sst-2", model="bert_tiny", out="run", batch_size=16).batch_size
        16
    """
    vocab: str | None = None
    lower_case: bool | None = None
    batch_size: int = 32
    learning_rate: float = 3e-5
    weight_decay: float = 0.01
    schedule: str = "google"
    adam_epsilon: float = 1e-6
    max_seq_length: int = 128
    mixed_precision: str | None = None
    jit_compile: bool = False
    steps_per_execution: int = 1
    strategy: str = "auto"
    backend: str | None = None
    tpu: str | None = None
    seed: int = 0
    progress: bool = True
    log_every: int = 10
