#!/usr/bin/env python
"""Where a request's time goes on the path TF Serving runs, and an A/B of two exports of the same model.

    python benchmarks/profile_serving.py [--model runs/sst2 | --export DIR] [--compare DIR] [--batch-sizes 1,32]
                                    [--out benchmarks/results/profile_serving.json]

Each export is loaded as the server loads it (savedmodels.session_bundle: restore op, then Session.run on the
`serving_default` SignatureDef's tensors) and fed real SST-2 dev sentences (the same ones benchmark_serving uses).
- profile: `--runs` Session.runs with RunOptions.FULL_TRACE; each executed node's time (step_stats
  all_end_rel_micros) summed by op type and by stage: tokenizer + packer (everything before the encoder),
  embeddings, each transformer layer, pooler + head, other. The per-node sum exceeds the wall time when nodes run
  in parallel and includes the executor's dispatch of each node, which is why node counts are reported too.
- compare: with `--compare`, both exports are timed in this process, alternating rounds (`--rounds`, the best of
  each kept), so the machine's load hits both alike: sentences/s per batch size and the ratio compare/export.
Without --export, the model (--model: a finetune folder; default: all-MiniLM-L6-v2 with a fresh 2-class head) is
exported to a temporary folder first.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The first path part (below the signature's call) that names a stage; the tokenizer and packer have no scope
# of their own in the classifier's graph, so nodes before the encoder that match nothing count as "text".
STAGES = (("transformer_layer_", None), ("embeddings", "embeddings"), ("pooler", "pooler + head"),
          ("logits", "pooler + head"))


def stage_of(node_name: str) -> str:
    for part in node_name.split("/"):
        for prefix, stage in STAGES:
            if part.startswith(prefix):
                if stage is None:                              # transformer_layer_3_1 -> "layer 3"
                    return "layer " + part[len(prefix):].split("_")[0]
                return stage
    return "text + other"


def op_type(timeline_label: str, node_name: str) -> str:
    """step_stats' label reads "name = OpType(inputs)"."""
    if " = " in timeline_label:
        return timeline_label.split(" = ", 1)[1].split("(", 1)[0].strip()
    return node_name


def profile(bundle, texts: list[str], runs: int) -> dict:
    """Per op type and per stage: microseconds per Session.run (summed over nodes) and node count."""
    import numpy as np
    import tensorflow as tf

    signature = bundle.signature_defs["serving_default"]
    feeds = {signature.inputs["text"].name: np.array(texts, object)}
    fetches = {k: v.name for k, v in signature.outputs.items()}
    for _ in range(5):
        bundle.session.run(fetches, feeds)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    by_type, by_stage = collections.defaultdict(lambda: [0.0, 0]), collections.defaultdict(lambda: [0.0, 0])
    start = time.perf_counter()
    for _ in range(runs):
        metadata = tf.compat.v1.RunMetadata()
        bundle.session.run(fetches, feeds, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                micros = node.all_end_rel_micros
                for table, key in ((by_type, op_type(node.timeline_label, node.node_name)),
                                   (by_stage, stage_of(node.node_name))):
                    table[key][0] += micros / runs
                    table[key][1] += 1 / runs
    traced_ms = (time.perf_counter() - start) / runs * 1000

    def rows(table):
        return [{"name": k, "micros": round(v[0], 1), "nodes": round(v[1])}
                for k, v in sorted(table.items(), key=lambda kv: -kv[1][0])]
    return {"traced_ms_per_run": traced_ms, "node_micros_per_run": sum(v[0] for v in by_type.values()),
            "nodes_per_run": round(sum(v[1] for v in by_type.values())), "by_op_type": rows(by_type),
            "by_stage": rows(by_stage)}


def compare(bundles: dict, texts: list[str], batch: int, rounds: int, seconds: float) -> dict:
    """Sentences/s of each bundle (benchmark_serving.throughput, as that benchmark counts them), alternating
    rounds of `seconds` each; the best round of each."""
    from benchmark_serving import served, throughput
    if len(texts) < batch:
        raise ValueError(f"{len(texts)} sentences make no batch of {batch}: give more (--sentences) or a smaller "
                         "--batch-sizes")
    runs = {name: served(bundle) for name, bundle in bundles.items()}
    for run in runs.values():                                             # warm-up: traces, oneDNN primitives
        for i in range(0, min(3 * batch, len(texts) - batch + 1), batch):
            run(texts[i:i + batch])
    best = dict.fromkeys(bundles, 0.0)
    for _ in range(rounds):
        for name, run in runs.items():
            best[name] = max(best[name], throughput(run, texts, batch, seconds))
    return best


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a `bert-keras finetune` output folder (default: MiniLM + a fresh head)")
    p.add_argument("--export", help="an exported SavedModel version folder to profile (default: export --model)")
    p.add_argument("--compare", help="a second export of the same signatures, timed against the first")
    p.add_argument("--sentences", help="SST-2 dev.tsv (default as benchmark_serving)")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--runs", type=int, default=50, help="traced Session.runs per profile (default 50)")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per export (default 5)")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per timing round (default 3)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "profile_serving.json"))
    args = p.parse_args(argv)

    import tensorflow as tf

    from benchmark_serving import build, sentences_from
    from bert_keras.atomic import write_json
    from savedmodels.precision import cpu_flags
    from savedmodels.session_bundle import SessionBundle

    texts, source, _ = sentences_from(args.sentences)
    with tempfile.TemporaryDirectory(prefix="profile_serving_") as work:
        export = args.export
        if export is None:
            from savedmodels.export import export_task_model
            model, _, _ = build(args.model)
            export = export_task_model(model, work, "ours", keras_file=False)
        bundles = {"export": SessionBundle(export)}
        if args.compare:
            bundles["compare"] = SessionBundle(args.compare)
        report = {"benchmark": "profile_serving", "export": args.export or "(exported --model)",
                  "compare": args.compare, "sentences": source, "batches": {},
                  "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni"}),
                  "host": {"cpus": os.cpu_count(), "tensorflow": tf.__version__}}
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            row = report["batches"][f"batch_{batch}"] = {}
            for name, bundle in bundles.items():
                row[f"profile_{name}"] = found = profile(bundle, texts[:batch], args.runs)
                print(f"batch {batch} {name}: {found['nodes_per_run']} nodes, node time "
                      f"{found['node_micros_per_run'] / 1000:.2f} ms per run ({found['traced_ms_per_run']:.2f} ms "
                      "wall, traced)", flush=True)
                for entry in found["by_stage"]:
                    print(f"    {entry['name']:<16} {entry['micros']:9.1f} us  {entry['nodes']:4d} nodes")
                for entry in found["by_op_type"][:12]:
                    print(f"    {entry['name']:<32} {entry['micros']:9.1f} us  {entry['nodes']:4d} nodes")
            if args.compare:
                speed = compare(bundles, texts, batch, args.rounds, args.seconds)
                row["sentences_per_second"] = speed
                row["compare_over_export"] = speed["compare"] / speed["export"]
                print(f"batch {batch}: export {speed['export']:.1f}, compare {speed['compare']:.1f} sentences/s "
                      f"({row['compare_over_export']:.3f}x)", flush=True)
        write_json(args.out, report)
        print(f"wrote {args.out}")
        return report


if __name__ == "__main__":
    main()
