"""The set-up both trainers share, in the order a run needs it:

    strategy = start(config)                      # strategy, then seed and precision policy
    out = output_folder(strategy, config.out)     # the chief writes `out`, other workers their own folders
    with strategy.scope():
        model = ...
        compile_for_training(model, config, total_steps, warmup_steps, **loss_and_metrics)
    history = fit(model, data, config, epochs=..., steps_per_epoch=..., callbacks=[...])
"""

from __future__ import annotations

import os
import sys

import keras
import tensorflow as tf

from bert_keras.backends import backend, distributed_devices, on_tensorflow
from bert_keras.training.callbacks import LearningRateLog, TensorBoard, TrainingCurves
from bert_keras.training.optimizer import create_optimizer
from bert_keras.training.data_parallel import start_data_parallel
from bert_keras.training.strategy import create_strategy


def start(config) -> tf.distribute.Strategy:
    """The run's tf.distribute strategy, then the seeds and the mixed-precision policy of `config`
    (a TrainingConfig). The strategy comes first: MultiWorkerMirroredStrategy must configure its collectives
    before TensorFlow runs any op. On Keras' JAX backend the strategy is TensorFlow's default (the host's input
    pipeline) and Keras' distribution splits each batch over JAX's devices (data_parallel.py).

    Example:
        >>> from bert_keras.finetune import FinetuneConfig
        >>> strategy = start(FinetuneConfig(task="sst-2", model="bert_tiny", out="run"))
        >>> strategy.num_replicas_in_sync
        1
    """
    if not on_tensorflow():         # JAX: one host pipeline, keras.distribution over the devices (data_parallel.py)
        if config.backend not in (None, backend()):
            raise ValueError(f"this run asks for the {config.backend} backend but Keras runs on {backend()}: set "
                             f"KERAS_BACKEND={config.backend} before Python starts (bert-keras: --backend)")
        start_data_parallel(config.strategy, config.batch_size)
        strategy = tf.distribute.get_strategy()
    else:
        if config.backend not in (None, "tensorflow"):
            raise ValueError(f"this run asks for the {config.backend} backend but Keras runs on TensorFlow: set "
                             f"KERAS_BACKEND={config.backend} before Python starts (bert-keras: --backend)")
        strategy = create_strategy(config.strategy, config.tpu)
    keras.utils.set_random_seed(config.seed)
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(config.mixed_precision)
    return strategy


def output_folder(strategy, out: str) -> str:
    """`out` for the chief (or a single process); `out/<task type>-<index>` for the other tasks of a multi-worker
    job, which write their own copies there instead of racing the chief for the same files; on JAX,
    `out/process-<index>` for every process but 0 of a run of several (data_parallel.py).

    Example:
        >>> output_folder(tf.distribute.get_strategy(), "run")
        'run'
    """
    if not on_tensorflow():
        import jax
        return out if jax.process_index() == 0 else os.path.join(out, f"process-{jax.process_index()}")
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type, task_id = (resolver.task_type, resolver.task_id) if resolver is not None else (None, None)
    has_chief = resolver is not None and "chief" in (resolver.cluster_spec().as_dict() or {})
    chief = task_type in (None, "chief") or (task_type == "worker" and task_id == 0 and not has_chief)
    return out if chief else os.path.join(out, f"{task_type}-{task_id}")


def static_batches(strategy, seq_length: int | None, jit_compile: bool) -> bool:
    """Whether every training batch must have the same shape, so the last partial batch of an epoch is dropped:
    on a TPU (it compiles the step for fixed shapes), or with a fixed sequence length under XLA. Elsewhere a
    partial batch costs one more trace at most and every example is trained on. On JAX over several devices too:
    a batch must divide over them."""
    return (isinstance(strategy, tf.distribute.TPUStrategy) or (seq_length is not None and jit_compile)
            or distributed_devices() > 1)


def compile_for_training(model, config, total_steps: int, warmup_steps: int, optimizer: str = "adamw",
                         **compile_args) -> None:
    """`model.compile` with BERT's optimizer (create_optimizer: AdamW or LAMB, warm-up then linear decay to 0 at
    `total_steps`, `config.learning_rate` at the peak, `config.schedule`, `config.weight_decay`, `config.adam_epsilon`), and the XLA and steps-per-execution
    settings of `config`; `compile_args`: the loss and metrics. Call it under the strategy's scope, on a built model
    with its trainable flags set: the optimizer's variables are built here, so a resume point's optimizer state
    loads into them before `fit` (and TaskModel._maybe_symbolic_build finds nothing left to build)."""
    model.compile(optimizer=create_optimizer(config.learning_rate, total_steps, warmup_steps,
                                             weight_decay=config.weight_decay, optimizer=optimizer,
                                             schedule=config.schedule, epsilon=config.adam_epsilon),
                  jit_compile=config.jit_compile or not on_tensorflow(), steps_per_execution=config.steps_per_execution, **compile_args)
    model.optimizer.build(model.trainable_variables)


def log_callbacks(out: str, metric: str | None, log_every: int = 10) -> list:
    """TensorBoard logs in `out/logs/train` (`batch_loss`, the running mean of the epoch's loss, and
    `batch_learning_rate` every `log_every` steps; at each epoch's end its logs: `epoch_loss`,
    `epoch_learning_rate` and an EpochEvaluation's `epoch_eval_<metric>`) and `out/training_curves.png`; put
    them after any callback that adds to the epoch's logs (EpochEvaluation)."""
    if log_every < 1:
        raise ValueError(f"--log-every {log_every}: give a number of steps, 1 or more")
    return [LearningRateLog(os.path.join(out, "logs", "train"), log_every),
            TensorBoard(os.path.join(out, "logs"), update_freq=log_every),
            TrainingCurves(os.path.join(out, "training_curves.png"), metric)]


def live_progress() -> bool:
    """Can stdout show a progress bar that redraws itself: a terminal, or a notebook's output (which reads "\r")?
    A log file or a pipe cannot: Keras' bar (which assumes any POSIX stdout can, keras.utils.Progbar) writes its
    ANSI colours, "\b" and "\r" there, and its lines end only with the epoch."""
    return ((hasattr(sys.stdout, "isatty") and sys.stdout.isatty()) or "ipykernel" in sys.modules
            or "PYCHARM_HOSTED" in os.environ)


def fit(model, data, config, *, epochs: int, steps_per_epoch: int, callbacks: list, initial_epoch: int = 0):
    """`model.fit` on a tf.data input that is already shuffled (shuffle=False: Keras would ignore it and warn),
    with a progress bar (`config.progress`, on a terminal: live_progress) or one plain line per epoch. Keras'
    progress logger runs before `callbacks` (unless they bring their own), so its epoch line is finished before
    a callback prints its own summary at the epoch's end (EpochEvaluation's "epoch 1: accuracy ...")."""
    if not on_tensorflow() and isinstance(data, tf.data.Dataset):
        build_from_spec(model, data.element_spec)
    if not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
        callbacks = [keras.callbacks.ProgbarLogger(), *callbacks]
    return model.fit(data, epochs=epochs, steps_per_epoch=steps_per_epoch, initial_epoch=initial_epoch,
                     callbacks=callbacks, verbose=1 if config.progress and live_progress() else 2, shuffle=False)


def build_from_spec(model, element_spec) -> None:
    """Builds the compiled loss and metrics of `model` from the shapes and dtypes of its training input, without
    reading a batch. Keras' JAX `fit` otherwise draws one batch through a second iterator of the input, and a
    second iterator of a reshuffling tf.data pipeline draws the next pass's shuffle: the training iterator then
    reads other orders than the one a resumed run reconstructs (training_input's skip). The metrics' state does
    not depend on the batch size or the length, so an axis the spec leaves unknown takes the size another input
    gives it (the same in all of them, so they broadcast), else 8."""
    known = {}
    for spec in tf.nest.flatten(element_spec):
        for axis, size in enumerate(spec.shape):
            if size is not None:
                known.setdefault(axis, size)

    def symbolic(spec):
        return keras.KerasTensor([known.get(axis, 8) if size is None else size for axis, size in enumerate(spec.shape)],
                                 spec.dtype.name)
    model._symbolic_build(data_batch=tf.nest.map_structure(symbolic, element_spec))
