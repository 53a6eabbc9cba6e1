"""Packed fine-tuning throughput (issue 49 item 4): training examples/s at the static length 128, `finetune --pack`
(up to K examples a row) against one example a row, on JAX and TensorFlow, in one run.

    python benchmarks/benchmark_packed_finetune.py [--sst2 ../shared/data/SST-2/train.tsv] [--examples 1024]
        [--steps 8] [--pack 8] [--batch-size 32] [--skip tensorflow|jax] [--out benchmarks/results/packed_finetune.json]

The model: the real all-MiniLM-L6-v2 weights (6 layers, hidden 384) with a 2-class head, its own preprocessor at
seq_length 128. The data: the first --examples SST-2 training phrases (skipped cleanly when the file is absent),
through the same input the trainer builds: unpacked, `text_dataset` batches of --batch-size examples padded to 128
(static shapes); packed, finetune/packed_examples.py's PackedTraining (rows of up to --pack examples; a step takes
about --batch-size examples in round(batch / examples-per-row) rows). Each side: one full training step (forward,
loss, backward, AdamW with the warm-up/decay schedule, as the trainer compiles it, XLA on both backends) on batches
drawn beforehand, two warm-up steps, then the wall time of --steps steps; examples/s = the real examples those steps
trained on / their time. Keras picks its backend once per process, so each backend runs in a subprocess of this
script (`--side`), one after the other; `ratios` are packed / unpacked within each backend (same process, back to
back). The load average before and after is recorded (2 shared cores: absolute figures drift, ratios less).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SEQ = 128


def side(args) -> dict:
    """One backend (this process's): unpacked then packed training steps -> their figures."""
    import keras
    import numpy as np

    from bert_keras.finetune import FinetuneConfig
    from bert_keras.finetune.packed_examples import PackedTraining
    from bert_keras.finetune.registry import get_task
    from bert_keras.loading import bundled_minilm_folder, load_backbone
    from bert_keras.training.setup import compile_for_training
    task = get_task("sst-2")
    examples = task.read(args.sst2)[:args.examples]
    config = FinetuneConfig(task="sst-2", model="minilm", out="-", batch_size=args.batch_size, seq_length=SEQ,
                            jit_compile=True)
    out = {"backend": keras.backend.backend()}

    def build():
        keras.utils.set_random_seed(0)
        encoder, preprocessor = load_backbone(bundled_minilm_folder(), seq_length=SEQ, max_seq_length=SEQ)
        model = task.build_model(encoder, preprocessor, examples)
        compile_for_training(model, config, 1000, 100, **task.compile_args())
        return model

    def timed(model, batches, count) -> dict:
        for batch in batches[:2]:                                        # tracing, XLA compilation
            model.train_on_batch(*batch)
        started = time.perf_counter()
        for batch in batches[2:2 + args.steps]:
            model.train_on_batch(*batch)
        seconds = time.perf_counter() - started
        done = int(sum(count(b) for b in batches[2:2 + args.steps]))
        return {"steps": args.steps, "seconds": round(seconds, 3), "examples": int(done),
                "rows_per_step": int(batches[0][0]["input_word_ids"].shape[0]),
                "examples_per_second": round(done / seconds, 2)}

    model = build()
    x, y = task.inputs(examples)
    data = model.text_dataset(x, y, batch_size=args.batch_size, training=True, drop_remainder=True)
    batches = [tuple(np.asarray(t) if not isinstance(t, dict) else {k: np.asarray(v) for k, v in t.items()}
                     for t in b) for b in data.repeat().take(args.steps + 2)]
    out["unpacked"] = timed(model, batches, lambda b: len(b[1]))
    model = build()
    packed = PackedTraining(task, examples, model, args.batch_size, seed=0, max_per_row=args.pack)
    batches = [tuple(np.asarray(t) if not isinstance(t, dict) else {k: np.asarray(v) for k, v in t.items()}
                     for t in b) for b in packed.dataset().take(args.steps + 2)]
    out["packed"] = {**timed(model, batches, lambda b: b[2].sum()), "packing": packed.summary()}
    out["ratio"] = round(out["packed"]["examples_per_second"] / out["unpacked"]["examples_per_second"], 3)
    return out


def run_side(backend: str, args) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join([str(REPO), *([args.jax_path] if args.jax_path else [])])}
    argv = [sys.executable, __file__, "--side", "--sst2", args.sst2, "--examples", str(args.examples), "--steps",
            str(args.steps), "--pack", str(args.pack), "--batch-size", str(args.batch_size)]
    process = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    if process.returncode:
        return {"error": process.stderr[-2000:]}
    return json.loads(process.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sst2", default=str(REPO.parent / "shared" / "data" / "SST-2" / "train.tsv"))
    p.add_argument("--examples", type=int, default=1024)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--pack", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--skip", default="", help="comma-separated: tensorflow, jax")
    p.add_argument("--jax-path", help="a folder holding jax (put on the JAX side's PYTHONPATH only)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "packed_finetune.json"))
    p.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.side:
        print(json.dumps(side(args)))
        return
    if not os.path.exists(args.sst2):
        print(f"skipped: no SST-2 training file at {args.sst2}")
        return
    result = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(), "cpus": os.cpu_count(),
              "seq_length": SEQ, "examples": args.examples, "batch_size": args.batch_size, "pack": args.pack,
              "data": args.sst2, "model": "all-MiniLM-L6-v2 (real weights), 2-class head",
              "load_average_before": os.getloadavg()}
    for backend in ("jax", "tensorflow"):
        if backend not in args.skip.split(","):
            result[backend] = run_side(backend, args)
    result["load_average_after"] = os.getloadavg()
    result["ratios"] = {b: result[b].get("ratio") for b in ("jax", "tensorflow") if b in result}
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["ratios"]))


if __name__ == "__main__":
    main()
