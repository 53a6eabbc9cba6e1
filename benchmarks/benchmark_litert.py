"""The LiteRT export (raw text in one .tflite) against ONNX Runtime and our SavedModel on the session path.

    python benchmarks/benchmark_litert.py [--model runs/sst2] [--sentences ../shared/data/SST-2/dev.tsv]
                                          [--seconds 10] [--rounds 5] [--quick]
                                          [--out benchmarks/results/litert.json]

One run, one process, the helpers of benchmark_serving.py:
- ours, ours_int8: the SST-2 classifier exported by savedmodels.export (fp32, and `--precision int8`), loaded
  as TF Serving loads it (savedmodels.session_bundle), serving_default fed raw strings;
- litert_fp32, litert_fp16, litert_int8: `bert-keras export --format litert` (savedmodels/litert.py), run by
  LiteRTModel (ai_edge_litert's InterpreterWithCustomOps with TF.Text's TFLite kernels; XNNPACK, LiteRT's default
  CPU delegate) at 1 and 2 threads, raw strings in, tokenizer included in the time;
- onnxruntime, onnxruntime_int8: benchmark_serving.py's ONNX Runtime peers (transformers' model on the same
  weights, torch.onnx.export, quantize_dynamic), at 1 and 2 threads, HF's BertTokenizerFast in the time.
Throughput in sentences/s at batch 1 and 32 over real SST-2 dev sentences, the peers taking turns in --rounds
rounds (the median of each peer's rounds; ratios litert over ORT at the same thread count and over ours are the
medians of the per-round ratios, so a drift in the machine's speed cancels); the files' sizes; each export's
accuracy on the labelled sentences; the CPU flags and the load average before and after (the machine may be
shared: ratios from one run are what to read).
Needs the [litert] and [torch] extras (without torch/onnxruntime the ORT rows are left out).
"""

from __future__ import annotations

import os
import pathlib
import platform
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serving_frame import budget as budget_of, parser, run_in_work_folder  # noqa: E402

THREADS = (1, 2)


def litert_runner(path: str, threads: int):
    from savedmodels.litert_runner import LiteRTModel
    model = LiteRTModel(path, num_threads=threads)
    return lambda texts: model.serve(text=texts)["probabilities"]


def interleaved(peers: dict, texts: list[str], batch: int, budget: float, rounds: int) -> dict:
    """Every peer's sentences/s in `rounds` rounds: in each, every peer runs budget / rounds seconds on the same
    texts (rotated a step each round), in an order rotated each round. A shared machine's speed drifts over
    minutes; measured in turn, a drift hits every peer alike, and per-round ratios cancel it.
    -> {name: [rate per round]}."""
    from benchmark_serving import throughput
    names, step = list(peers), max(1, len(texts) // rounds)
    rates = {name: [] for name in names}
    for r in range(rounds):
        rotated = texts[r * step:] + texts[:r * step]
        for name in names[r % len(names):] + names[:r % len(names)]:
            rates[name].append(throughput(peers[name], rotated, batch, budget / rounds))
    return rates


def main(argv=None) -> None:
    run_in_work_folder(_main, argv, "benchmark_litert_")


def _main(argv, work: str) -> None:
    p = parser(__doc__, seconds=10.0, quick_seconds=2.0, out="litert.json")
    p.add_argument("--rounds", type=int, default=5, help="rounds each measurement's seconds are split into "
                                                           "(peers take turns; medians and per-round ratios)")
    args = p.parse_args(argv)
    budget = budget_of(args)
    load_before = os.getloadavg()

    import numpy as np
    import tensorflow as tf

    from benchmark_serving import build, hf_classifier, onnx_peers, sentences_from, served
    from bert_keras.atomic import write_json
    from savedmodels.export import export_task_model
    from savedmodels.litert import export_litert
    from savedmodels.precision import cpu_flags, with_precision
    from savedmodels.session_bundle import SessionBundle

    texts, source, labels = sentences_from(args.sentences)
    model, pre, hf_folder = build(args.model)
    peers, sizes = {}, {}
    for name, copy in (("ours", model), ("ours_int8", with_precision(model, "int8"))):
        peers[name] = served(SessionBundle(export_task_model(copy, work, name, keras_file=False)))
    lite_paths = {}
    for precision in ("fp32", "fp16", "int8"):
        lite_paths[precision] = export_litert(model, os.path.join(work, f"litert_{precision}.tflite"), precision)
        sizes[f"litert_{precision}"] = os.path.getsize(lite_paths[precision])
        print(f"litert {precision}: {sizes[f'litert_{precision}'] / 1e6:.1f} MB", flush=True)
    for precision, path in lite_paths.items():
        for t in THREADS:
            peers[f"litert_{precision}_threads_{t}"] = litert_runner(path, t)
    hf = hf_classifier(model, hf_folder)
    onnx_report = None
    if hf:
        onnx = onnx_peers(*hf, max(THREADS), work)
        if onnx:
            runs, onnx_report = onnx
            for name, run in runs.items():
                for t in THREADS:
                    run.set_threads(t)
                    peers[f"{name}_threads_{t}"] = (lambda r, t: (lambda b: (r.set_threads(t), r(b))[1]))(run, t)
            for candidate in pathlib.Path(work).glob("*.onnx"):         # fp32 and int8 (onnx_peer.py)
                sizes[f"onnx:{candidate.name}"] = candidate.stat().st_size

    # Accuracy and agreement: each export on the labelled sentences; LiteRT fp32 against ours.
    accuracy, agreement = {}, {}
    chunks = [texts[i:i + 32] for i in range(0, len(texts), 32)]
    reference = np.concatenate([peers["ours"](c) for c in chunks])
    for name in ["ours", "ours_int8"] + [f"litert_{p}_threads_{max(THREADS)}" for p in lite_paths]:
        probabilities = reference if name == "ours" else np.concatenate([peers[name](c) for c in chunks])
        accuracy[name] = float((probabilities.argmax(-1) == np.array(labels)).mean())
        agreement[name] = float(np.abs(probabilities - reference).max())
        print(f"{name:<24} accuracy {accuracy[name]:.4f}, max |p - ours| {agreement[name]:.2e}", flush=True)

    results, per_round = {}, {}
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        row = results.setdefault(f"batch_{batch}", {})
        rates = per_round[f"batch_{batch}"] = interleaved(peers, texts, batch, budget, args.rounds)
        for name in peers:
            row[name] = statistics.median(rates[name])
            print(f"batch {batch:>3} {name:<28} {row[name]:8.1f} sentences/s (rounds: "
                  f"{', '.join(f'{x:.1f}' for x in rates[name])})", flush=True)

        def ratio(a, b):                                  # the median of the per-round ratios
            return statistics.median(x / y for x, y in zip(rates[a], rates[b]))
        for t in THREADS:
            for precision in lite_paths:
                lite = f"litert_{precision}_threads_{t}"
                row[f"{lite}_over_ours"] = ratio(lite, "ours")
                for peer in ("onnxruntime", "onnxruntime_int8"):
                    if f"{peer}_threads_{t}" in row:
                        key = f"{lite}_over_{peer}_threads_{t}"
                        row[key] = ratio(lite, f"{peer}_threads_{t}")
                        print(f"batch {batch:>3} {key}: {row[key]:.2f}", flush=True)
    report = {"benchmark": "litert", "sentences": source, "num_sentences": len(texts),
              "model": args.model or "all-MiniLM-L6-v2 + a fresh 2-class head",
              "throughput_sentences_per_second": results, "throughput_per_round": per_round, "rounds": args.rounds,
              "file_bytes": sizes, "accuracy": accuracy,
              "max_probability_difference_vs_ours": agreement, "onnxruntime": onnx_report,
              "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni",
                                                 "avx_vnni", "amx_int8", "fma"}),
              "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "tensorflow": tf.__version__,
                       "load_average_before": load_before, "load_average_after": os.getloadavg(),
                       "shared": "the machine is shared with other workers (about 7 on 2 cores when this was "
                                 "written): absolute figures vary run to run, ratios within one run are the "
                                 "comparison"},
              "seconds_per_measurement": budget}
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
