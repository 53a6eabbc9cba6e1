#!/usr/bin/env python
"""Fine-tuning on JAX against fine-tuning on TensorFlow, the same draws: for each seed, one TensorFlow run and one
JAX run of tools/parity/acceptance_finetune.py (ours alone, finetune end to end) that share every random draw, so
their scores differ only by the backends' float rounding and by anything the JAX route computes differently.

What each backend would draw for itself, and what is shared here:
- the training order: already the same (tf.data shuffles on the host with the seed, on both backends);
- the head's starting weights: Keras draws them with each backend's own generator, so the JAX run starts from the
  TensorFlow run's head (acceptance_finetune --head-out / --head-from);
- the dropout masks: Keras turns the same seed state into other masks on each backend, so both runs seed their
  dropout layers by tools/parity/dropout_replay.py's stream and the JAX run draws TensorFlow's masks
  (JaxDrawsTensorflowMasks, which also pads JAX's batches to TensorFlow's lengths).
Unpaired, the seed-to-seed spread (1-1.4 points on these slices) swamps a 0.3-point comparison of 3-seed means
(docs/accuracy.md); paired, a seed's two scores sit within rounding of each other unless the backends differ.

Writes benchmarks/results/backends/<task>_seed<N>_{tensorflow,jax}.json (acceptance_finetune's reports) and
benchmarks/results/backends/<task>.json: per seed both metric sets and JAX - TensorFlow, and their mean.

Usage:
  nice -n 10 .venv/bin/python tools/parity/acceptance_backends.py --task conll2003 --seeds 0 1 2
  .venv/bin/python tools/parity/acceptance_backends.py --task squad --seeds 0 --reuse    # keep finished sides
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKENDS = ("tensorflow", "jax")


def run_side(task: str, seed: int, backend: str, folder: str, extra: list[str], reuse: bool) -> dict:
    """One backend's acceptance_finetune run (TensorFlow writes the head the JAX run starts from) -> its report."""
    out = os.path.join(folder, f"{task}_seed{seed}_{backend}.json")
    head = os.path.join(folder, f"{task}_seed{seed}_head.npz")
    if not (reuse and os.path.isfile(out) and (backend == "jax" or os.path.isfile(head))):
        cmd = [sys.executable, os.path.join(ROOT, "tools", "parity", "acceptance_finetune.py"), "--task", task,
               "--seed", str(seed), "--ours-only", "--replay-dropout", "--out", out, *extra]
        cmd += ["--head-out", head] if backend == "tensorflow" else ["--head-from", head]
        print(f"{backend}: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"})
    with open(out, encoding="utf-8") as f:
        report = json.load(f)
    if report["ours"].get("backend") != backend:
        raise RuntimeError(f"{out} ran on {report['ours'].get('backend')}, not {backend}")
    return report


METRICS = {"sst-2": ["accuracy"], "openbookqa": ["accuracy"], "conll2003": ["f1"], "squad": ["f1", "exact_match"]}


def table(task: str, seeds: list[int], folder: str) -> str:
    """Markdown rows (task, metric, backend, each seed, mean) of the seeds whose two runs are written, then JAX -
    TensorFlow per seed and its mean in points (SQuAD's metrics are already in points)."""
    import numpy as np
    found = {}
    for seed in seeds:
        paths = {b: os.path.join(folder, f"{task}_seed{seed}_{b}.json") for b in BACKENDS}
        if all(os.path.isfile(path) for path in paths.values()):
            found[seed] = {}
            for backend, path in paths.items():
                with open(path, encoding="utf-8") as f:
                    found[seed][backend] = json.load(f)["ours"]["metrics"]
    if not found:
        return f"{task}: no seed of {seeds} has both runs in {folder}"
    scale, form = (1, "{:.2f}") if task == "squad" else (100, "{:.4f}")
    rows = [f"| task | metric | | {' | '.join(f'seed {s}' for s in found)} | mean |", "|" + "---|" * (len(found) + 4)]
    for metric in METRICS[task]:
        for backend in BACKENDS:
            values = [found[s][backend][metric] for s in found]
            rows.append(f"| {task} | {metric} | {backend} | "
                        + " | ".join(form.format(v) for v in values + [np.mean(values)]) + " |")
        deltas = [scale * (found[s]["jax"][metric] - found[s]["tensorflow"][metric]) for s in found]
        rows.append(f"| {task} | {metric} | JAX − TF (points) | " + " | ".join(f"{d:+.2f}" for d in deltas)
                    + f" | **{np.mean(deltas):+.2f}** |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--reuse", action="store_true", help="keep a side whose report is already written")
    p.add_argument("--folder", default=os.path.join(ROOT, "benchmarks", "results", "backends"))
    p.add_argument("--table", action="store_true",
                   help="run nothing: print the Markdown rows of the seeds' finished pairs (docs/accuracy.md)")
    args, extra = p.parse_known_args(argv)       # the rest goes to acceptance_finetune (e.g. --schedule linear)
    if args.table:
        print(table(args.task, args.seeds, args.folder))
        return
    os.makedirs(args.folder, exist_ok=True)

    from bert_keras.atomic import write_json
    seeds = {}
    for seed in args.seeds:
        sides = {backend: run_side(args.task, seed, backend, args.folder, extra, args.reuse) for backend in BACKENDS}
        metrics = {backend: {k: v for k, v in report["ours"]["metrics"].items() if isinstance(v, float)}
                   for backend, report in sides.items()}
        seeds[seed] = {**metrics, "jax_minus_tensorflow": {k: metrics["jax"][k] - v
                                                           for k, v in metrics["tensorflow"].items()},
                       "train_seconds": {b: r["ours"]["train_seconds"] for b, r in sides.items()}}
        print(json.dumps({seed: seeds[seed]["jax_minus_tensorflow"]}), flush=True)
    keys = seeds[args.seeds[0]]["jax_minus_tensorflow"]
    summary = {"task": args.task, "seeds": seeds, "acceptance_finetune_options": extra,
               "mean_jax_minus_tensorflow": {k: sum(s["jax_minus_tensorflow"][k] for s in seeds.values()) / len(seeds)
                                             for k in keys},
               "command": " ".join(["python", "tools/parity/acceptance_backends.py"]
                                   + (argv if argv is not None else sys.argv[1:]))}
    write_json(os.path.join(args.folder, f"{args.task}.json"), summary)
    print(json.dumps(summary["mean_jax_minus_tensorflow"]))


if __name__ == "__main__":
    main()
