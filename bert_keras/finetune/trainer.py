"""Fine-tune any task kind with Keras `model.fit`: one loop for all of them.

BERT's recipe as defaults (AdamW, no decay on LayerNorm and bias, 10% linear warmup then linear decay, lr 3e-5,
batch 32, 3 epochs, dropout 0.1). Under a tf.distribute strategy (TPU: preprocessing stays in tf.data on the host).
The output folder holds, when it finishes:
  model.keras         the task model with its preprocessor (vocab, casing, lengths), label names and answer
                      rules: `keras.models.load_model` reopens it and it takes raw text; export works from it alone
                      (weights and configuration only: no optimizer state)
  metrics.json        the official metric after each epoch and the final one, steps, per-epoch timings, and what
                      repeats the run: every setting, the seed, package versions, the machine
                      (`bert-keras finetune --from-record metrics.json --out new_run`)
  logs/               TensorBoard (loss and learning rate every `log_every` steps, the evaluation metric and the
                      epoch's loss and learning rate after each epoch)
  training_curves.png loss per step and the metric per epoch
  backup/             while training, a resume point after every epoch and within it every `save_every` steps, or
                      every 10 minutes by default (training/resume.py: weights with the optimizer's state and
                      step, dropout seeds, the step within the epoch and its running metrics, the scores so
                      far): a rerun of the same command after a kill resumes at that step, with the batches and
                      dropout masks the whole run would have had
On a CPU or GPU every training example is used each epoch (the last batch may be smaller); on a TPU, or with a
fixed --seq-length under XLA, the last partial batch is dropped (static shapes) and the run says so. In a
multi-worker job the chief writes `out`, the other workers their own `out/worker-<i>`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import tensorflow as tf

from bert_keras import storage
from bert_keras.atomic import atomic_file, write_json
from bert_keras.checkpoints.load import pooler_unused
from bert_keras.finetune.packed_examples import packed_training
from bert_keras.finetune.source_head import start_from_source_head
from bert_keras.loading import load_backbone
from bert_keras.training.callbacks import EpochEvaluation, EpochTimer, TrainingCurves  # noqa: F401 (old home)
from bert_keras.training.config import TrainingConfig
from bert_keras.training.input_pipelines import distributed_input
from bert_keras.training.record import run_record
from bert_keras.training.resume import ResumeCheckpoint
from bert_keras.training.setup import (build_from_spec, compile_for_training, fit, live_progress, log_callbacks,
                                       output_folder, start, static_batches)


@dataclasses.dataclass
class FinetuneConfig(TrainingConfig):
    """A fine-tuning run: the task, the model to start from, the data and the recipe (BERT's by default).

    Args:
        task: a task name of bert_keras.finetune.TASKS ("sst-2", "squad", "openbookqa", "conll2003", ...).
        model: a checkpoint folder or prefix, a zoo name, a .keras file, or a preset name (random weights); a
            Hugging Face task folder's head is continued when it fits the task (finetune/source_head.py).
        out: the run folder.
        train, eval: the training and evaluation files; default: the task's standard names in `data`.
        data: a folder in the task's standard layout (e.g. GLUE's train.tsv and dev.tsv).
        epochs: passes over the training set (fractions allowed).
        eval_batch_size: the batch size of the evaluation after each epoch.
        warmup_proportion: the share of the training steps over which the learning rate rises to its peak.
        schedule: the decay after warm-up; "linear" (transformers' get_linear_schedule_with_warmup) by default for
            fine-tuning: over 3 seeds on the dev slices of SST-2, OpenBookQA, CoNLL-2003 and SQuAD its mean was
            at or above google-research's ("google") on every task (docs/accuracy.md).
        seq_length: a fixed sequence length (TPUs); None pads each batch to its longest (a multiple of 8).
        pack: sentence classification, regression and token tagging with a fixed seq_length: train on rows of up
            to `pack` examples each (finetune/packed_examples.py; `batch_size` stays examples per step); 0: one a
            row.
        max_train_examples, max_eval_examples: use only the first N examples.
        task_args: task options (SQuAD: doc_stride, max_query_length, max_answer_length,
            null_score_diff_threshold).
        save_every: a resume point every this many steps within an epoch (a kill loses at most that many); None:
            one every SAVE_SECONDS of training (10 minutes). Both: whichever comes first; and one after every epoch.
        The rest (batch size, learning rate, precision, strategy, seed...): bert_keras.training.TrainingConfig.

    Example:
        >>> config = FinetuneConfig(task="sst-2", model="bert_tiny", out="run", data="glue/SST-2", epochs=2)
        >>> config.learning_rate
        3e-05
    """
    task: str
    model: str
    out: str
    train: str | None = None
    eval: str | None = None
    data: str | None = None
    epochs: float = 3
    eval_batch_size: int = 64
    warmup_proportion: float = 0.1
    schedule: str = dataclasses.field(default="linear", kw_only=True)
    seq_length: int | None = None
    pack: int = dataclasses.field(default=0, kw_only=True)
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    task_args: dict = dataclasses.field(default_factory=dict)
    save_every: int | None = None


def _files(config: FinetuneConfig, task) -> tuple[str, str | None]:
    """(training file, evaluation file or None) as named, each checked to exist (on a bucket too)."""
    train, evaluate = config.train, config.eval
    if config.data:
        train = train or os.path.join(config.data, task.default_files[0])
        evaluate = evaluate or os.path.join(config.data, task.default_files[1])
    if not train:
        raise FileNotFoundError("no training data: pass --data DIR or --train FILE")
    for path in (train, evaluate):
        if path and not storage.exists(path):
            raise FileNotFoundError(f"no such file: {path} (expected the {task.name} layout; see --help)")
    return train, evaluate


def training_input(task, train: list, model, config: FinetuneConfig, shard: int = 0, shards: int = 1,
                   batch_size: int | None = None, drop_remainder: bool = False,
                   skip_batches: int = 0) -> tf.data.Dataset:
    """One input pipeline's training batches, repeated: examples shard, shard + shards, ... (disjoint parts for
    the hosts of a multi-worker job or a pod), in batches of `batch_size` (per replica), the last of each pass
    smaller unless `drop_remainder`; with a fixed sequence length and `drop_remainder` the model's text_dataset
    pins every shape (a TPU compile needs to see them). A resumed run passes over the `skip_batches` its epochs
    already trained on: every pass's shuffle is drawn again in order, so the next batch is the one an
    uninterrupted run would read (the passes are preprocessed again, seconds against an epoch's training)."""
    batch_size = batch_size or config.batch_size
    ds = task.dataset(train[shard::shards], model, batch_size, training=True, seed=config.seed,
                      drop_remainder=drop_remainder).repeat()
    return ds.skip(skip_batches) if skip_batches else ds


def resume_settings(config: FinetuneConfig) -> dict:
    """The settings a resumed run must share with the run it continues: all but where and how it reports, the
    evaluation, and the devices (a run may resume on other hardware)."""
    ignored = {"out", "progress", "log_every", "eval", "eval_batch_size", "max_eval_examples", "strategy",
               "backend", "tpu", "steps_per_execution", "save_every"}
    return {k: v for k, v in dataclasses.asdict(config).items() if k not in ignored}


def steps_per_epoch(task, train: list, model, batch_size: int, drop_remainder: bool) -> tuple[int, int]:
    """(batches per pass over `train`, training sequences per pass): examples, or SQuAD's windows, counted once
    without building an input pipeline."""
    sequences = task.training_sequences(train, model)
    return (sequences // batch_size if drop_remainder else -(-sequences // batch_size)), sequences


def _check_settings(config: FinetuneConfig) -> None:
    """The settings alone, before anything is read or loaded (the command line's flag types check them too)."""
    for name in ("batch_size", "eval_batch_size", "max_seq_length", "steps_per_execution", "log_every"):
        if getattr(config, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(config, name)}: give a positive number")
    for name in ("seq_length", "max_train_examples", "max_eval_examples", "save_every"):
        if getattr(config, name) is not None and getattr(config, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(config, name)}: give a positive number")
    if not 0 <= config.warmup_proportion <= 1:
        raise ValueError(f"--warmup-proportion {config.warmup_proportion}: give a share of the steps in [0, 1]")
    if config.pack < 0 or (config.pack and config.seq_length is None):
        raise ValueError(f"--pack {config.pack}: give a positive number of examples a row, with --seq-length")
    if not config.epochs > 0:
        raise ValueError(f"--epochs {config.epochs}: give a positive number of passes")
    if not config.learning_rate > 0:
        raise ValueError(f"--learning-rate {config.learning_rate}: give a positive number")


def _check(config: FinetuneConfig, train: list, train_file: str, evaluation: list, eval_file: str | None) -> None:
    if len(train) < config.batch_size:
        raise ValueError(f"{len(train)} training examples is fewer than one batch of {config.batch_size}: "
                         "lower --batch-size or give more data")
    for examples, path, use in ((train, train_file, "train"), (evaluation, eval_file, "evaluate")):
        if any(getattr(example, "label", 0) is None for example in examples):
            raise ValueError(f"{path} has no labels (the layout of a test file): {use} on a labelled file")


# A resume point at least this often (seconds of a run in one process; several processes save by steps and epochs
# only, so that all of them keep the same points).
SAVE_SECONDS = 600


def several_processes(strategy) -> bool:
    """Is the run one of several processes (a multi-worker job, a JAX run over several hosts)?"""
    from bert_keras.backends import on_tensorflow
    if not on_tensorflow():
        import jax
        return jax.process_count() > 1
    return strategy.extended._in_multi_worker_mode()


# What a fine-tuning run writes in its folder (what --overwrite deletes first).
OUTPUTS = ("model.keras", "metrics.json", "training_curves.png", "logs", "backup", "predictions.json",
           "null_odds.json")


def finetune(config: FinetuneConfig, callbacks: list | None = None, overwrite: bool = False) -> dict:
    """Train, evaluate after every epoch and save (see the module docstring for the files).

    The settings are checked before anything is read: a `max_seq_length` (or `seq_length`) over the model's
    positions is refused from its configuration before the model loads, and a finished run in `config.out` is
    refused unless `overwrite`. A run refused or failing before its first resume point removes the folder it
    created; a killed run resumes at its last saved step when run again (`config.save_every`).

    Args:
        config: the run's settings.
        callbacks: more Keras callbacks for `model.fit`, after the library's own (its evaluation has run when
            their `on_epoch_end` is called; `on_train_begin` comes before the first step is traced).
        overwrite: replace a finished run in `config.out` (its files are deleted first); without it such a run
            is refused (FileExistsError).

    Returns:
        {"metrics": the final scores ({} without an evaluation set), "history": the scores per epoch, "loss":
        the training loss per epoch, "timing": {"fit_seconds", "train_seconds", "eval_seconds", "epochs": per
        epoch {"epoch", "train_seconds", "eval_seconds", "examples_per_second"}}, "steps": training steps,
        "out": the folder written, "model": the trained task model}.

    Raises:
        ValueError: a setting out of range, `max_seq_length` over the model's positions, bad data (the readers'
            DataFormatError names file and line), or a model source that cannot be read.
        FileNotFoundError: a data file or the model source is missing.
        FileExistsError: `config.out` is a file, or holds a finished run (without `overwrite`).
        OSError: a resume point could not be written (a full disk): the previous point is kept to resume from.

    Example:
        >>> result = finetune(FinetuneConfig(task="sst-2", model="bert_tiny", vocab="vocab.txt", out="run",
        ...                                  data="glue/SST-2", epochs=1))                  # doctest: +SKIP
        >>> result["metrics"]["accuracy"]                                                  # doctest: +SKIP
    """
    from bert_keras.source_config import check_max_seq_length
    from bert_keras.training.resume import run_folder
    from bert_keras.finetune.registry import get_task
    _check_settings(config)
    get_task(config.task, **config.task_args).check_lengths(config.max_seq_length, config.seq_length)
    check_max_seq_length(config.model, config.max_seq_length)
    check_max_seq_length(config.model, config.seq_length, "--seq-length")
    with run_folder(config.out, os.path.join(config.out, "backup"), "model.keras", OUTPUTS, overwrite):
        return _finetune(config, callbacks)


def _finetune(config: FinetuneConfig, callbacks: list | None) -> dict:
    from bert_keras.finetune.registry import get_task
    task = get_task(config.task, **config.task_args)
    train_file, eval_file = _files(config, task)
    train = task.read_training(storage.local_copy(train_file))[:config.max_train_examples]
    evaluation = task.read(storage.local_copy(eval_file))[:config.max_eval_examples] if eval_file else []
    _check(config, train, train_file, evaluation, eval_file)
    strategy = start(config)
    out = output_folder(strategy, config.out)
    storage.makedirs(out)
    drop = static_batches(strategy, config.seq_length, config.jit_compile)
    with strategy.scope(), pooler_unused():         # the pooler is fine-tuned, or unused (task.uses_pooler)
        encoder, preprocessor = load_backbone(config.model, config.vocab, config.lower_case,
                                              seq_length=config.seq_length, max_seq_length=config.max_seq_length)
        model = task.build_model(encoder, preprocessor, train)
        note = start_from_source_head(model, config.model)   # a Hugging Face task folder's head, when it fits
        if note:
            print(note, flush=True)
        if not task.uses_pooler:           # its head reads the tokens: the pooler gets no gradient, so no update
            model.encoder.pooler.trainable = False
        packed = packed_training(task, train, model, config, strategy) if config.pack else None
        per_epoch, sequences = ((packed.steps_per_epoch, packed.examples_per_epoch) if packed else
                                steps_per_epoch(task, train, model, config.batch_size, drop))
        if per_epoch < 1:
            raise ValueError(f"{sequences} training sequences is fewer than one batch of {config.batch_size}: "
                             "lower --batch-size or give more data")
        total_steps = max(1, int(per_epoch * config.epochs))
        compile_for_training(model, config, total_steps, int(total_steps * config.warmup_proportion),
                             **task.compile_args())
    if drop and sequences % config.batch_size and not packed:
        print(f"dropping the last partial batch of each epoch ({sequences % config.batch_size} of {sequences} "
              f"training sequences): shapes must be static on a TPU or with --seq-length and --jit-compile",
              flush=True)
    timer = EpochTimer()
    evaluator = EpochEvaluation(task, evaluation, config.eval_batch_size, out) if evaluation else None
    per_step = min(per_epoch, total_steps)
    checkpoint = ResumeCheckpoint(os.path.join(out, "backup"), resume_settings(config), evaluator, timer, per_step,
                                  config.save_every, None if several_processes(strategy) else SAVE_SECONDS)
    with strategy.scope():
        done = checkpoint.restore(model)
    if checkpoint.batch:
        print(f"resumed at step {checkpoint.step}: batch {checkpoint.batch} of {per_step} in epoch {done + 1} "
              f"({checkpoint.folder})", flush=True)
    elif done:
        print(f"resumed after epoch {done} ({checkpoint.folder})", flush=True)
    else:           # a fresh start: the TensorBoard files of a run stopped before its first point go
        storage.rmtree(os.path.join(out, "logs"))
    # The evaluation before the logs, so they see its metric; the checkpoint after the records it keeps.
    own = [timer, *([evaluator] if evaluator else []), checkpoint,
           *log_callbacks(out, task.metric_name if evaluation else None, config.log_every)]
    # When the batches divide the data evenly, drop_remainder drops nothing and tells the graph the batch size
    # (a static batch dimension: the same kernels, so the same float results, as before partial batches were kept).
    whole = drop or sequences % config.batch_size == 0
    train_input = packed.input(strategy, checkpoint.step) if packed else distributed_input(
        strategy, lambda shard, shards, batch_size: training_input(
        task, train, model, config, shard, shards, batch_size, whole,
        skip_batches=checkpoint.step * config.batch_size // (batch_size * shards)), config.batch_size)
    if checkpoint.batch and isinstance(train_input, tf.data.Dataset):
        build_from_spec(model, train_input.element_spec)    # the epoch's running metrics load before its first step
    started = time.perf_counter()
    try:
        fit(model, train_input, config, epochs=max(1, int(-(-config.epochs // 1))), steps_per_epoch=per_step,
            initial_epoch=done, callbacks=own + list(callbacks or []))
    except KeyboardInterrupt:      # Ctrl-C: where the same command goes on (on its own line after a live bar)
        print(("\n" if config.progress and live_progress() else "") + checkpoint.interrupted(total_steps),
              file=sys.stderr, flush=True)
        raise
    timing = _timing(time.perf_counter() - started, timer.seconds, evaluator.seconds if evaluator else [],
                     sequences if not drop or packed else per_epoch * config.batch_size)
    scores = evaluator.history if evaluator else []
    final = scores[-1] if scores else {}
    _save(model, out, {"task": config.task, "train": train_file, "eval": eval_file,
                       "train_examples": len(train), "eval_examples": len(evaluation),
                       "training_sequences": sequences, "steps_per_epoch": per_epoch, "steps": total_steps,
                       "dropped_last_batch": bool(drop and sequences % config.batch_size and not packed),
                       **({"packed": packed.summary()} if packed else {}),
                       "final": final, "history": scores, "timing": timing, **run_record(config, strategy)})
    checkpoint.finish()
    return {"metrics": final, "history": scores, "loss": checkpoint.losses, "timing": timing,
            "steps": total_steps, "out": out, "model": model}


def _timing(fit_seconds: float, train: list, evaluation: list, sequences_per_epoch: int) -> dict:
    epochs = [{"epoch": i + 1, "train_seconds": round(t, 3),
               "eval_seconds": round(evaluation[i], 3) if i < len(evaluation) else 0.0,
               "examples_per_second": round(sequences_per_epoch / t, 2) if t > 0 else None}
              for i, t in enumerate(train)]
    eval_seconds = sum(evaluation)
    return {"fit_seconds": round(fit_seconds, 3), "train_seconds": round(fit_seconds - eval_seconds, 3),
            "eval_seconds": round(eval_seconds, 3), "epochs": epochs}


def _save(model, out, metrics):
    """model.keras (everything needed to use it, without the optimizer's state: that stays in backup/ while a
    run can resume) and the metrics report; files of older versions removed."""
    weights_only = model.with_preprocessor(model.preprocessor)       # a copy that was never compiled
    with atomic_file(os.path.join(out, "model.keras")) as tmp:
        weights_only.save(tmp)
    write_json(os.path.join(out, "metrics.json"), metrics)
    for stale in ("vocab.txt", "preprocessing.json", "task.json"):    # written by bert_keras before one-file models
        storage.remove(os.path.join(out, stale))
