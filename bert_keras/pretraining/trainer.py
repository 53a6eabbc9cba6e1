"""`bert-keras pretrain`: BertPretrainer.fit on google-research records (or dynamic masking), resumable to the step.

Keras runs the loop; an "epoch" here is one checkpoint interval (`save_every` steps), so the progress bar, the
TensorBoard logs and the checkpoints share one clock. A checkpoint is a resume point in `checkpoint/`
(training/resume.py: weights with the optimizer's moments and step counter, then `state.json` ({"step"}) naming
them, replaced last), so a kill -9 at any moment leaves the previous complete checkpoint. On
start, a checkpoint in `out` is restored and the data pipeline starts at the next batch without reading the ones
already trained on (pretraining/reading_order.py); dropout's random stream is re-derived from (seed, interval) at
every interval, so a resumed run computes exactly what an uninterrupted one does.
"""

from __future__ import annotations

import dataclasses
import os
import time

import keras

from bert_keras import storage
from bert_keras.atomic import atomic_file
from bert_keras.checkpoints.load import pooler_unused
from bert_keras.training.resume import restore_resume_point, save_resume_point
from bert_keras.training.config import TrainingConfig


@dataclasses.dataclass
class PretrainConfig(TrainingConfig):
    """A pretraining run: the model to start from, the data and the step plan.

    Args:
        model: a preset (random weights: from scratch; needs `vocab`), a checkpoint folder or a .keras file.
        out: the run folder (a rerun with the same `out` resumes from its checkpoint).
        records: comma-separated globs or folders of pretraining TFRecords (google-research's features).
        text: or comma-separated text files, masked dynamically (masked LM only).
        pack: with `text`: pack the masked lines into rows of up to 3 sequences on the fly
            (dataset.dynamic_masking_dataset's `pack`); `batch_size` is then rows a step. (Packed records are
            packed by pretraining-data --pack and seen by their features.)
        max_seq_length: tokens a sequence (a packed row); None: the records' own (`records.record_layout`: a
            different value given is refused), or 128 with `text`.
        max_predictions_per_seq: masked positions per sequence; None: the records' own (a different value given
            is refused; packed records: unused, their rows' slots are fixed when written), or 20 with `text`.
        nsp: train next-sentence prediction too (records only).
        train_steps: optimizer steps in all; a multiple of `save_every`.
        save_every: the checkpoint interval in steps (also Keras' epoch here).
        warmup_steps: linear warm-up steps; None: 100, or a tenth of `train_steps` when that is fewer than 100.
        optimizer: "adamw", or "lamb" for large batches.
        The rest (batch size, learning rate, precision, strategy, seed...): bert_keras.training.TrainingConfig.

    Example:
        >>> PretrainConfig(model="bert_tiny", vocab="vocab.txt", out="run", text="corpus.txt",
        ...                train_steps=8, save_every=4).warmup()
        0
    """
    model: str
    out: str
    records: str | None = None
    text: str | None = None
    pack: bool = False
    learning_rate: float = dataclasses.field(default=1e-4, kw_only=True)
    max_seq_length: int | None = dataclasses.field(default=None, kw_only=True)
    max_predictions_per_seq: int | None = None
    nsp: bool = True
    train_steps: int = 1000
    save_every: int = 100
    warmup_steps: int | None = None
    optimizer: str = "adamw"

    def warmup(self) -> int:
        """The warm-up steps this run uses (`warmup_steps`, or its default for `train_steps`)."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return DEFAULT_WARMUP_STEPS if self.train_steps >= DEFAULT_WARMUP_STEPS else self.train_steps // 10


DEFAULT_WARMUP_STEPS = 100
DEFAULT_MAX_SEQ_LENGTH, DEFAULT_MAX_PREDICTIONS = 128, 20        # with --text (records carry their own)


class StepCheckpoint(keras.callbacks.Callback):
    """Saves weights + optimizer state and the step at the end of every interval; reseeds dropout at its start."""

    def __init__(self, folder: str, steps_per_interval: int, seed: int):
        super().__init__()
        self.folder, self.steps, self.seed = folder, steps_per_interval, seed

    def restored_step(self, model) -> int:
        record = restore_resume_point(model, self.folder)
        return int(record["step"]) if record else 0

    def on_epoch_begin(self, epoch, logs=None):
        for layer in self.model._flatten_layers():
            for k, generator in enumerate(getattr(layer, "_seed_generators", [])):
                generator.state.assign([self.seed * 1_000_003 + epoch, k])

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.steps
        save_resume_point(self.model, self.folder, step, {"step": step})


class Throughput(keras.callbacks.Callback):
    """Real tokens per second of each interval (Keras epoch), added to its logs (so to the History, the printed
    line: progress.StepProgress, and TensorBoard's epoch scalars): `rows_per_step` x steps x the interval's mean
    `real_tokens_per_row` (BertPretrainer's metric: input_mask ones, packed or not) / its wall time."""

    def __init__(self, rows_per_step: int, steps_per_interval: int):
        super().__init__()
        self.rows, self.steps, self.start = rows_per_step, steps_per_interval, None

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or "real_tokens_per_row" not in logs or self.start is None:
            return
        seconds = time.perf_counter() - self.start
        logs["seconds"] = seconds
        logs["real_tokens_per_second"] = logs["real_tokens_per_row"] * self.rows * self.steps / seconds


# What a pretraining run writes in its folder (what --overwrite deletes first).
OUTPUTS = ("encoder.keras", "pretrainer.keras", "vocab.txt", "tf1_checkpoint", "checkpoint", "logs",
           "training_curves.png", "input_index.npz", "metrics.json")


def pretrain(config: PretrainConfig, overwrite: bool = False) -> dict:
    """Trains; returns {"history": per-interval logs, "step": final step, "out": folder, "replicas", "model"}.

    The settings are checked before anything loads (a `max_seq_length` over the model's positions from its
    configuration; with records, the lengths they were written with: `resolve_lengths`); a finished run in
    `config.out` (encoder.keras written, its checkpoint at `train_steps`) is refused unless `overwrite` (its files
    are deleted first), a killed one resumes from its last checkpoint (its half-written files removed:
    `remove_partial_files`), and a run refused or failing before its first checkpoint removes the folder it
    created. A preset trained from scratch takes the vocabulary's size (backbone.py).

    Raises:
        ValueError: a setting out of range, or data or a model source that cannot be read.
        FileNotFoundError: a data file or the model source is missing.
        FileExistsError: `config.out` is a file, or holds a finished run (without `overwrite`).
    """
    from bert_keras.source_config import check_max_seq_length
    from bert_keras.training.resume import run_folder
    if bool(config.records) == bool(config.text):
        raise ValueError("give --records (pretraining TFRecords) or --text (text files, dynamic masking), not both")
    config = resolve_lengths(config)
    for name in ("batch_size", "max_seq_length", "max_predictions_per_seq", "steps_per_execution", "log_every"):
        if getattr(config, name) is not None and getattr(config, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(config, name)}: give a positive number")
    if not config.learning_rate > 0:
        raise ValueError(f"--learning-rate {config.learning_rate}: give a positive number")
    check_max_seq_length(config.model, config.max_seq_length)
    with run_folder(config.out, os.path.join(config.out, "checkpoint"), "encoder.keras", OUTPUTS, overwrite,
                    done=config.train_steps):
        remove_partial_files(config.out)
        return _pretrain(config)


def resolve_lengths(config: PretrainConfig) -> PretrainConfig:
    """`config` with its sequence length and masked LM slots set: with records, those they were written with
    (records.record_layout; a different value given is refused, naming both), else the given ones or 128 and 20.
    Packed rows carry their MLM slots as written (packed_prediction_slots of the writer's settings): their
    max_predictions_per_seq stays as given (None or the writer's), unused.

    Args:
        config: PretrainConfig, `max_seq_length` and `max_predictions_per_seq` None where not given.

    Returns:
        PretrainConfig.

    Raises:
        ValueError: a value that contradicts the records, or records that cannot be read or disagree.
        FileNotFoundError: no records match `config.records`.

    Example:
        >>> resolve_lengths(PretrainConfig(model="bert_tiny", out="run", text="corpus.txt")).max_seq_length
        128
    """
    from bert_keras.pretraining.records import record_files, record_layout
    if config.pack and config.records:              # before the records are read: the flag is the mistake
        raise ValueError("--pack packs --text lines on the fly; records are packed by pretraining-data --pack "
                         "(pretrain --records sees packed files by their features)")
    if not config.records:
        return dataclasses.replace(
            config, max_seq_length=DEFAULT_MAX_SEQ_LENGTH if config.max_seq_length is None else config.max_seq_length,
            max_predictions_per_seq=DEFAULT_MAX_PREDICTIONS if config.max_predictions_per_seq is None
            else config.max_predictions_per_seq)
    layout = record_layout(record_files(config.records))
    if config.max_seq_length not in (None, layout.max_seq_length):
        raise ValueError(f"--max-seq-length {config.max_seq_length}, but the records {config.records} hold "
                         f"sequences of {layout.max_seq_length} tokens (pretraining-data --max-seq-length "
                         f"{layout.max_seq_length}): leave it out, or write records of {config.max_seq_length}")
    if not layout.packed and config.max_predictions_per_seq not in (None, layout.predictions):
        raise ValueError(f"--max-predictions-per-seq {config.max_predictions_per_seq}, but the records "
                         f"{config.records} hold {layout.predictions} a sequence (pretraining-data "
                         f"--max-predictions-per-seq {layout.predictions}): leave it out, or write records with "
                         f"{config.max_predictions_per_seq}")
    return dataclasses.replace(config, max_seq_length=layout.max_seq_length,
                               max_predictions_per_seq=config.max_predictions_per_seq if layout.packed
                               else layout.predictions)


def remove_partial_files(out: str) -> None:
    """Removes what a killed run left half-written in `out` (atomic.py's `.<name>.partial-*` files and folders:
    the results, metrics.json, the input index, the resume point's state.json); its complete files stay, so the
    rerun resumes. (A resume point's weights file cut short by a kill is not named by state.json, and the next
    point removes it: training/resume.py.)

    Example:
        >>> remove_partial_files("runs/pretrain")                                       # doctest: +SKIP
    """
    for folder in (out, os.path.join(out, "checkpoint")):
        if not storage.isdir(folder):
            continue
        for name in storage.listdir(folder):
            if name.startswith(".") and ".partial-" in name:
                path = os.path.join(folder, name)
                if storage.isdir(path):
                    storage.rmtree(path)
                else:
                    storage.remove(path)


def _pretrain(config: PretrainConfig) -> dict:
    from bert_keras.pretraining.backbone import pretraining_backbone
    from bert_keras.pretraining.dataset import dynamic_masking_dataset, records_dataset
    from bert_keras.pretraining.packed_records import packed_feature_spec
    from bert_keras.pretraining.progress import StepProgress
    from bert_keras.pretraining.records import check_records, record_files, record_layout
    from bert_keras.tasks.pretrainer import BertPretrainer
    from bert_keras.backends import distributed_devices
    from bert_keras.training.input_pipelines import distributed_input
    from bert_keras.training.setup import compile_for_training, fit, log_callbacks, output_folder, start
    from bert_keras.training.static_shapes import with_static_shapes
    if config.train_steps <= 0 or config.save_every <= 0 or config.train_steps % config.save_every:
        raise ValueError(f"--train-steps {config.train_steps} must be a positive multiple of --save-every "
                         f"{config.save_every}")
    warmup = config.warmup()
    if not 0 <= warmup <= config.train_steps:
        raise ValueError(f"--warmup-steps {warmup} must be between 0 and --train-steps {config.train_steps}")
    strategy = start(config)            # first: MultiWorkerMirroredStrategy configures collectives before any op
    packed, slots = False, None
    if config.pack and not config.text:
        raise ValueError("--pack packs --text lines on the fly; records are packed by pretraining-data --pack "
                         "(pretrain --records sees packed files by their features)")
    if config.records:
        files = record_files(config.records)
        layout = record_layout(files)                  # as written (resolve_lengths has set the lengths from it)
        packed = layout.packed                         # pretraining-data --pack: rows of up to 3 sequences
        slots = layout.predictions if packed else None        # as written: packed_prediction_slots
        spec = packed_feature_spec(config.max_seq_length, slots) if packed else None
        check_records(files[:1], config.max_seq_length, config.max_predictions_per_seq or slots, spec)
    else:
        packed = config.pack
        files = [f.strip() for f in config.text.split(",")]
        missing = [f for f in files if not storage.exists(f)]
        if missing:
            raise FileNotFoundError(f"no such file: {', '.join(missing)}")
        from bert_keras.data.text_files import check_utf8
        for file in files:                   # UTF-8, or the first bad byte named, before the model is built
            check_utf8(file)
    if config.warmup_steps is None and warmup != DEFAULT_WARMUP_STEPS:
        print(f"warm-up: {warmup} steps (a tenth of --train-steps {config.train_steps}; set --warmup-steps to "
              "change it)", flush=True)
    out = output_folder(strategy, config.out)
    storage.makedirs(out)
    checkpoint = StepCheckpoint(os.path.join(out, "checkpoint"), config.save_every, config.seed)
    with strategy.scope(), pooler_unused():         # the pooler is trained (NSP), or unused (MLM only)
        encoder, preprocessor, note = pretraining_backbone(config.model, config.vocab, config.lower_case,
                                                           config.max_seq_length)
        if note:
            print(note, flush=True)
        model = BertPretrainer(encoder)
        set_nsp_trainable(model, config.nsp and not config.text)         # MLM only: neither is read
        compile_for_training(model, config, config.train_steps, warmup, optimizer=config.optimizer)
        step = checkpoint.restored_step(model)
    replicas = strategy.num_replicas_in_sync         # input pipelines' unit (JAX: 1, its devices split each batch)
    devices = replicas * distributed_devices()
    if step:
        print(f"resumed from step {step} ({checkpoint.folder})", flush=True)
    if step >= config.train_steps:             # killed while saving the results: write them
        _save(model, preprocessor, out)
        _write_metrics(out, config, strategy, [], packed)
        return {"history": [], "step": step, "out": out, "replicas": devices, "model": model, "packed": packed}

    def make_dataset(shard: int, shards: int, batch_size: int):
        """One input pipeline: its part of the data, per-replica batches, from the first batch it has not fed."""
        where = dict(seed=config.seed, first_batch=step * replicas // shards, shard=(shard, shards),
                     index_cache=os.path.join(out, "input_index.npz"))
        if config.records:
            ds = records_dataset(files, batch_size, config.max_seq_length, config.max_predictions_per_seq,
                                 nsp=config.nsp, packed=packed, slots=slots, **where)
        else:
            ds = dynamic_masking_dataset(files, preprocessor, batch_size, config.max_seq_length,
                                         config.max_predictions_per_seq, pack=config.pack, **where)
        return with_static_shapes(ds, batch_size)      # fixed by construction: let the TPU compile see it
    data = distributed_input(strategy, make_dataset, config.batch_size)
    history = fit(model, data, config, epochs=config.train_steps // config.save_every,
                  steps_per_epoch=config.save_every, initial_epoch=step // config.save_every,
                  callbacks=[checkpoint, Throughput(config.batch_size, config.save_every),
                             *log_callbacks(out, "mlm_accuracy", config.log_every),
                             StepProgress(config.save_every, config.train_steps)])
    _save(model, preprocessor, out)
    history = [dict(zip(history.history, values)) for values in zip(*history.history.values())]
    _write_metrics(out, config, strategy, history, packed)
    return {"history": history, "step": config.train_steps, "out": out, "replicas": devices, "model": model,
            "packed": packed}


def _write_metrics(out: str, config: PretrainConfig, strategy, history: list, packed: bool) -> None:
    """metrics.json: the run record (training/record.py), each interval's logs, whether the rows were packed,
    the rows and sequences a step trains on (packed: rows x the sequences_per_row measured in training), and
    real tokens per second (Throughput's, over the intervals after the first when there are several: the first
    holds the compilation)."""
    from bert_keras.training.record import run_record
    from bert_keras.atomic import write_json
    per_row = [h["sequences_per_row"] for h in history if "sequences_per_row" in h] if packed else []
    per_row = sum(per_row) / len(per_row) if per_row else (None if packed else 1.0)
    timed = [h for h in history if "seconds" in h]
    timed = timed[1:] if len(timed) > 1 else timed
    tokens = sum(h["real_tokens_per_second"] * h["seconds"] for h in timed)
    write_json(os.path.join(out, "metrics.json"), {
        "packed": packed, "rows_per_step": config.batch_size,
        "sequences_per_step": None if per_row is None else round(per_row * config.batch_size, 4),
        "real_tokens_per_second": round(tokens / sum(h["seconds"] for h in timed), 1) if timed else None,
        "history": history, **run_record(config, strategy)})


def set_nsp_trainable(model, trainable: bool) -> None:
    """Marks the pooler and the NSP head trainable or not. A masked-LM-only run (--text, --no-nsp) never reads
    them: as trainable they would get no gradient (Keras warns "Gradients do not exist for variables
    ['pooler/kernel', ..., 'nsp_head/bias']") and, on JAX, zero gradients with AdamW's weight decay still shrinking
    them. The saved models have them trainable again (`_save`), so fine-tuning trains the pooler.

    Example:
        >>> set_nsp_trainable(bert_keras.tasks.BertPretrainer(bert_keras.BertEncoder(
        ...     bert_keras.preset_config("bert_tiny"))), False)                        # doctest: +SKIP
    """
    model.encoder.pooler.trainable = trainable
    model.nsp_head.trainable = trainable


def _save(model, preprocessor, out: str):
    """The encoder as `encoder.keras` (what `finetune --model` takes), the pretrainer, and a TF1 checkpoint with
    the `cls/` heads (google-research's run_pretraining.py layout); every layer trainable in them."""
    from bert_keras.checkpoints import save_google_checkpoint
    set_nsp_trainable(model, True)
    with atomic_file(os.path.join(out, "encoder.keras")) as tmp:
        model.encoder.save(tmp)
    with atomic_file(os.path.join(out, "pretrainer.keras")) as tmp:
        model.save(tmp)
    with atomic_file(os.path.join(out, "vocab.txt")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(preprocessor.vocab) + "\n")
    save_google_checkpoint(model.encoder, os.path.join(out, "tf1_checkpoint"), vocab_file=list(preprocessor.vocab),
                           heads=model.head_weights())
