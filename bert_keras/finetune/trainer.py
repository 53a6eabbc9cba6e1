"""Fine-tune any task kind with Keras `model.fit`: one loop for all of them.

BERT's recipe as defaults (AdamW, no decay on LayerNorm and bias, 10% linear warmup then linear decay, lr 3e-5,
batch 32, 3 epochs, dropout 0.1). Under a tf.distribute strategy (TPU: preprocessing stays in tf.data on the host).
The output folder holds, when it finishes:
  model.keras         the task model with its preprocessor (vocab, casing, lengths), label names and answer
                      rules: `keras.models.load_model` reopens it and it takes raw text; export works from it alone
  metrics.json        the official metric after each epoch, and the final one (a report, not needed to load)
  logs/               TensorBoard (per-step loss and learning rate, per-epoch metric)
  training_curves.png loss per step and the metric per epoch
  backup/             Keras BackupAndRestore state while training: a rerun of the same command resumes there
"""

from __future__ import annotations

import dataclasses
import os

import keras
import tensorflow as tf

from bert_keras.atomic import atomic_file, write_json
from bert_keras.loading import load_backbone
from bert_keras.training.input_pipelines import distributed_input


@dataclasses.dataclass
class FinetuneConfig:
    task: str
    model: str                       # checkpoint folder/prefix, zoo name, .keras file, or a preset name (random init)
    out: str
    train: str | None = None         # defaults: <data>/<task's train file>
    eval: str | None = None
    data: str | None = None
    vocab: str | None = None         # needed when the model source has no vocab.txt beside it
    lower_case: bool | None = None   # default: from the vocabulary (uncased vocabularies have no capitals)
    epochs: float = 3
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 3e-5
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    seq_length: int | None = None    # fixed length; None pads each batch to its longest (multiple of 8)
    max_seq_length: int = 128
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    mixed_precision: str | None = None   # "mixed_bfloat16" (TPU) or "mixed_float16" (GPU)
    jit_compile: bool = False
    steps_per_execution: int = 1
    strategy: str = "auto"
    tpu: str | None = None
    seed: int = 0
    task_args: dict = dataclasses.field(default_factory=dict)
    progress: bool = True


def _files(config: FinetuneConfig, task) -> tuple[str, str | None]:
    train, evaluate = config.train, config.eval
    if config.data:
        train = train or os.path.join(config.data, task.default_files[0])
        evaluate = evaluate or os.path.join(config.data, task.default_files[1])
    if not train:
        raise FileNotFoundError("no training data: pass --data DIR or --train FILE")
    for path in (train, evaluate):
        if path and not os.path.exists(path):
            raise FileNotFoundError(f"no such file: {path} (expected the {task.name} layout; see --help)")
    return train, evaluate


class EpochEvaluation(keras.callbacks.Callback):
    """The task's official metric on the evaluation set after every epoch, into the logs and metrics.json."""

    def __init__(self, task, examples, batch_size, out):
        super().__init__()
        self.task, self.examples = task, examples
        self.batch_size, self.out, self.history = batch_size, out, []

    def on_epoch_end(self, epoch, logs=None):
        scores = self.task.evaluate(self.model, self.examples, self.batch_size)
        self.history.append({"epoch": epoch + 1, **scores})
        if hasattr(self.task, "write_predictions"):             # SQuAD: predictions.json for the official script
            self.task.write_predictions(self.out)
        if logs is not None:
            logs.update({f"eval_{k}": v for k, v in scores.items() if isinstance(v, (int, float))})
        print(f"epoch {epoch + 1}: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()
                                                 if isinstance(v, float)), flush=True)


class TrainingCurves(keras.callbacks.Callback):
    """Loss per step and the evaluation metric per epoch, drawn to a PNG beside the TensorBoard logs."""

    def __init__(self, path, metric=None):
        super().__init__()
        self.path, self.metric, self.losses, self.epochs = path, metric, [], []
        self.step = 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if logs and "loss" in logs:
            self.losses.append((self.step, float(logs["loss"])))

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(f"eval_{self.metric}", (logs or {}).get(self.metric)) if self.metric else None
        if value is not None:                       # the evaluation metric, else the training one (pretraining)
            self.epochs.append((self.step, float(value)))
        self.draw()

    def draw(self):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        if self.losses:
            ax.plot(*zip(*self.losses), color="tab:blue", lw=1)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (running mean)", color="tab:blue")
        if self.epochs:
            right = ax.twinx()
            right.plot(*zip(*self.epochs), "o-", color="tab:red")
            right.set_ylabel(self.metric, color="tab:red")
        fig.tight_layout()
        with atomic_file(self.path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)


def training_input(task, train: list, model, config: FinetuneConfig, shard: int = 0, shards: int = 1,
                   batch_size: int | None = None) -> tf.data.Dataset:
    """One input pipeline's training batches, repeated: examples shard, shard + shards, ... (disjoint parts for
    the hosts of a multi-worker job or a pod), in batches of `batch_size` (per replica); with a fixed sequence
    length the model's text_dataset pins every shape (a TPU compile needs to see them)."""
    batch_size = batch_size or config.batch_size
    return task.dataset(train[shard::shards], model, batch_size, training=True, seed=config.seed).repeat()


def finetune(config: FinetuneConfig) -> dict:
    """Train, evaluate and save; returns {"metrics": final scores, "history": per epoch, "loss": per epoch,
    "out": folder, "model": the trained task model}."""
    from bert_keras.finetune.registry import get_task
    from bert_keras.training import create_optimizer, create_strategy
    task = get_task(config.task, **config.task_args)
    train_file, eval_file = _files(config, task)
    train = task.read(train_file)[:config.max_train_examples]
    evaluation = task.read(eval_file)[:config.max_eval_examples] if eval_file else []
    if len(train) < config.batch_size:
        raise ValueError(f"{len(train)} training examples is fewer than one batch of {config.batch_size}: "
                         "lower --batch-size or give more data")
    keras.utils.set_random_seed(config.seed)
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(config.mixed_precision)
    strategy = create_strategy(config.strategy, config.tpu)
    os.makedirs(config.out, exist_ok=True)
    with strategy.scope():
        encoder, preprocessor = load_backbone(config.model, config.vocab, config.lower_case,
                                              seq_length=config.seq_length, max_seq_length=config.max_seq_length)
        model = task.build_model(encoder, preprocessor, train)
        train_ds = task.dataset(train, model, config.batch_size, training=True, seed=config.seed)
        steps_per_epoch = int(train_ds.cardinality())
        if steps_per_epoch < 0:            # windows (SQuAD) are counted by one pass over the data
            steps_per_epoch = sum(1 for _ in task.dataset(train, model, config.batch_size, True, config.seed))
        total_steps = max(1, int(steps_per_epoch * config.epochs))
        optimizer = create_optimizer(config.learning_rate, total_steps, warmup_proportion=config.warmup_proportion,
                                     weight_decay=config.weight_decay)
        model.compile(optimizer=optimizer, jit_compile=config.jit_compile,
                      steps_per_execution=config.steps_per_execution, **task.compile_args())
    callbacks = [keras.callbacks.BackupAndRestore(os.path.join(config.out, "backup")),
                 keras.callbacks.TensorBoard(os.path.join(config.out, "logs"), update_freq=50)]
    evaluator = None
    if evaluation:
        evaluator = EpochEvaluation(task, evaluation, config.eval_batch_size, config.out)
        callbacks.append(evaluator)
    callbacks.append(TrainingCurves(os.path.join(config.out, "training_curves.png"),
                                    task.metric_name if evaluation else None))
    epochs = max(1, int(-(-config.epochs // 1)))
    train_input = distributed_input(strategy, lambda shard, shards, batch_size: training_input(
        task, train, model, config, shard, shards, batch_size), config.batch_size)
    fit = model.fit(train_input, epochs=epochs, steps_per_epoch=min(steps_per_epoch, total_steps),
              callbacks=callbacks, verbose=1 if config.progress else 2)
    history = evaluator.history if evaluator else []
    final = history[-1] if history else {}
    _save(model, config.out, {"task": config.task, "train": train_file, "eval": eval_file,
                              "train_examples": len(train), "eval_examples": len(evaluation),
                              "steps": total_steps, "final": final, "history": history})
    return {"metrics": final, "history": history, "loss": fit.history.get("loss", []), "out": config.out,
            "model": model}


def _save(model, out, metrics):
    """model.keras (everything needed to use it) and the metrics report; files of older versions removed."""
    with atomic_file(os.path.join(out, "model.keras")) as tmp:
        model.save(tmp)
    write_json(os.path.join(out, "metrics.json"), metrics)
    for stale in ("vocab.txt", "preprocessing.json", "task.json"):    # written by bert_keras before one-file models
        if os.path.exists(os.path.join(out, stale)):
            os.remove(os.path.join(out, stale))
