"""Encoder forward throughput: ours (with and without XLA) against keras-hub, PyTorch and onnxruntime.

    python benchmarks/benchmark_encoder.py [--configs minilm,bert_base] [--batch-sizes 1,32] [--quick]
                                      [--out benchmarks/results/encoder.json]

All peers run in this process on the same config, sequence length 128 and random weights (throughput does not depend
on their values), at os.cpu_count() threads; pytorch and the onnxruntime peers, whose workers spin-wait (so that on
a busy host 2 threads run slower than 1), at 1 thread too, their best counted (ms_by_threads in the row). pytorch is
transformers' BertModel; onnxruntime and onnxruntime_int8 are that same model object exported by torch.onnx.export
(opset 17, dynamic batch and sequence axes; benchmarks/onnx_peer.py), fp32 and dynamically quantized (quantize_dynamic,
QInt8 weights per channel), run by an onnxruntime InferenceSession with ORT_ENABLE_ALL, fed the ids PyTorch is fed.
Checked before timing, per config and batch: ORT fp32's last_hidden_state equals PyTorch's to 1e-4 (asserted);
int8's largest difference from fp32 and its per-token cosine similarity go in the JSON ("onnx_checks"), with
ours/ORT speed ratios ("ratios": the peer's time over ours, above 1 when ours is faster; *_threads_N: the peer at
ours' thread count). FLOPs are counted analytically (2 per multiply-add: Q/K/V/output projections, attention scores
and weighted values, feed-forward, pooler) and reported as GFLOP/s and as a share of the machine's fp32 GEMM peak,
measured here as the best of tf.matmul (graph and XLA), NumPy and PyTorch on a 2048^3 product.
Time: median of timed repeats after warm-up.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEQ = 128
CONFIGS = {
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    "bert_base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}


def forward_flops(c: dict, batch: int, seq: int = SEQ) -> float:
    h, i, n = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    tokens = batch * seq
    per_layer = 2 * tokens * (4 * h * h + 2 * h * i) + 2 * 2 * batch * seq * seq * h
    return n * per_layer + 2 * batch * h * h


def measure(fn, min_repeats: int, budget_s: float) -> float:
    fn()
    fn()                                               # warm-up: tracing, XLA compilation, allocator
    times, start = [], time.perf_counter()
    while len(times) < min_repeats or (time.perf_counter() - start < budget_s and len(times) < 50):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def gemm_peaks(min_repeats: int, n: int = 2048) -> dict:
    """fp32 GEMM GFLOP/s of every BLAS at hand on an n x n x n product; the peak is the best of them."""
    import numpy as np
    import tensorflow as tf
    a = np.random.default_rng(0).standard_normal((n, n)).astype("float32")
    t = tf.constant(a)
    runs = {"tf_matmul": (lambda f: lambda: f(t).numpy())(tf.function(lambda x: tf.matmul(x, x))),
            "tf_matmul_xla": (lambda f: lambda: f(t).numpy())(tf.function(lambda x: tf.matmul(x, x),
                                                                            jit_compile=True)),
            "numpy": lambda: a @ a}
    try:
        import torch
        ta = torch.from_numpy(a)
        runs["torch"] = lambda: torch.mm(ta, ta)
    except ImportError:
        pass
    return {name: round(2 * n ** 3 / measure(fn, min_repeats, 3.0) / 1e9, 1) for name, fn in runs.items()}


def ours(c, batch, jit):
    import numpy as np
    import tensorflow as tf

    from bert_keras import BertConfig, BertEncoder
    encoder = BertEncoder(BertConfig(**c))
    x = {"input_word_ids": np.random.randint(1000, 30000, (batch, SEQ)).astype("int32"),
         "input_mask": np.ones((batch, SEQ), "int32"), "input_type_ids": np.zeros((batch, SEQ), "int32")}
    fn = tf.function(lambda t: encoder(t, training=False)["sequence_output"], jit_compile=jit)
    return lambda: fn(x).numpy()


def keras_hub_backbone(c, batch):
    import keras_hub
    import numpy as np
    import tensorflow as tf
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
        hidden_dim=c["hidden_size"], intermediate_dim=c["intermediate_size"], max_sequence_length=512)
    x = {"token_ids": np.random.randint(1000, 30000, (batch, SEQ)).astype("int32"),
         "padding_mask": np.ones((batch, SEQ), "int32"), "segment_ids": np.zeros((batch, SEQ), "int32")}
    fn = tf.function(lambda t: backbone(t, training=False)["sequence_output"], jit_compile=True)
    return lambda: fn(x).numpy()


class TorchAndOnnx:
    """One transformers BertModel per config, its ONNX exports (fp32, int8) and their sessions, made on first use:
    the pytorch and onnxruntime peers run the same weights on the same ids."""

    def __init__(self, c: dict, folder: str, threads: int):
        self.c, self.folder, self.threads = c, folder, threads
        self._model, self.paths, self._sessions = None, {}, {}

    @property
    def model(self):
        if self._model is None:
            import torch
            from transformers import BertConfig, BertModel
            torch.set_num_threads(self.threads)
            torch.manual_seed(0)
            self._model = BertModel(BertConfig(vocab_size=30522, **self.c)).eval()
        return self._model

    def session(self, precision: str, threads: int | None = None):
        threads = threads or self.threads
        if (precision, threads) not in self._sessions:
            import onnx  # noqa: F401  (an ImportError here skips the peer; torch.onnx.export writes through it)
            import onnxruntime  # noqa: F401

            import onnx_peer
            if "fp32" not in self.paths:
                self.paths["fp32"] = onnx_peer.export(
                    self.model, ["input_ids", "attention_mask"], "last_hidden_state",
                    os.path.join(self.folder, f"bert_{self.c['hidden_size']}_{self.c['num_hidden_layers']}.onnx"),
                    output_axes=(0, 1))
            if precision == "int8" and "int8" not in self.paths:
                self.paths["int8"] = onnx_peer.quantize_int8(self.paths["fp32"])
            self._sessions[precision, threads] = onnx_peer.make_session(self.paths[precision], threads)
        return self._sessions[precision, threads]

    def describe(self) -> dict:
        import onnx_peer
        return onnx_peer.describe(self.threads, self.paths.get("fp32"), self.paths.get("int8"))


def token_ids(batch: int):
    import numpy as np
    ids = np.random.default_rng(batch).integers(1000, 30000, (batch, SEQ))
    return ids.astype("int64"), np.ones((batch, SEQ), "int64")


def torch_bert(hf: TorchAndOnnx, batch):
    import torch
    model = hf.model
    ids, mask = (torch.from_numpy(a) for a in token_ids(batch))

    def run():
        with torch.inference_mode():
            return model(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
    run.set_threads = torch.set_num_threads
    return run


def onnx_bert(hf: TorchAndOnnx, batch, precision: str):
    session = [hf.session(precision)]
    ids, mask = token_ids(batch)
    feed = {"input_ids": ids, "attention_mask": mask}

    def run():
        return session[0].run(None, feed)[0]
    run.set_threads = lambda t: session.__setitem__(0, hf.session(precision, t))
    return run


def onnx_check(hf: TorchAndOnnx, batch) -> dict:
    """ORT fp32 vs PyTorch (asserted to 1e-4) and int8 vs fp32 on the batch the peers are timed on."""
    import numpy as np
    reference = torch_bert(hf, batch)()
    fp32, int8 = onnx_bert(hf, batch, "fp32")(), onnx_bert(hf, batch, "int8")()
    vs_torch = float(np.abs(fp32 - reference).max())
    assert vs_torch <= 1e-4, f"ONNX Runtime fp32 last_hidden_state differs from PyTorch's by {vs_torch}"
    cosine = (fp32 * int8).sum(-1) / (np.linalg.norm(fp32, axis=-1) * np.linalg.norm(int8, axis=-1))
    return {"fp32_max_difference_vs_torch": vs_torch, "int8_max_difference_vs_fp32": float(np.abs(int8 - fp32).max()),
            "int8_mean_cosine_vs_fp32": float(cosine.mean()), "int8_min_cosine_vs_fp32": float(cosine.min())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="minilm,bert_base")
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--quick", action="store_true", help="one repeat each: a smoke run, not a measurement")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "encoder.json"))
    args = parser.parse_args()
    repeats, budget = (1, 0.0) if args.quick else (5, 20.0)

    import tensorflow as tf

    from bert_keras.atomic import write_json
    peaks = gemm_peaks(repeats)
    peak = max(peaks.values())
    print(f"fp32 GEMM 2048^3, GFLOP/s: {peaks}; peak = {peak}")
    rows, checks, ratios, onnx_info = [], {}, {}, None
    threads = os.cpu_count()
    with tempfile.TemporaryDirectory() as onnx_dir:
        for name in args.configs.split(","):
            c = CONFIGS[name]
            hf = TorchAndOnnx(c, onnx_dir, threads)
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                try:
                    check = onnx_check(hf, batch)
                    checks.setdefault(name, {})[f"batch_{batch}"] = check
                    onnx_info = hf.describe()
                    print(f"  {name} B={batch} onnxruntime fp32 vs pytorch max |diff| "
                          f"{check['fp32_max_difference_vs_torch']:.2e}; int8 vs fp32 max |diff| "
                          f"{check['int8_max_difference_vs_fp32']:.3f}, "
                          f"mean cosine {check['int8_mean_cosine_vs_fp32']:.5f}")
                except ImportError as e:
                    print(f"  {name} B={batch} onnxruntime check: skipped ({e.name} not installed)")
                peers = {"ours": lambda: ours(c, batch, False), "ours_xla": lambda: ours(c, batch, True),
                         "keras_hub_xla": lambda: keras_hub_backbone(c, batch),
                         "pytorch": lambda: torch_bert(hf, batch),
                         "onnxruntime": lambda: onnx_bert(hf, batch, "fp32"),
                         "onnxruntime_int8": lambda: onnx_bert(hf, batch, "int8")}
                flops = forward_flops(c, batch)
                timed = {}
                for peer, make in peers.items():
                    try:
                        run = make()
                    except ImportError as e:
                        print(f"  {name} B={batch} {peer}: skipped ({e.name} not installed)")
                        continue
                    except Exception as e:  # a peer that cannot run here is reported, not fatal
                        print(f"  {name} B={batch} {peer}: skipped ({type(e).__name__}: {str(e)[:200]})")
                        rows.append({"config": name, "batch": batch, "peer": peer, "skipped": str(e)[:500]})
                        continue
                    by_threads = {}
                    if hasattr(run, "set_threads"):
                        for t in sorted({1, threads}):
                            run.set_threads(t)
                            by_threads[t] = measure(run, repeats, budget)
                        run.set_threads(threads)
                    seconds = timed[peer] = min(by_threads.values()) if by_threads else measure(run, repeats, budget)
                    gflops = flops / seconds / 1e9
                    rows.append({"config": name, "batch": batch, "seq": SEQ, "peer": peer,
                                 "ms": round(seconds * 1e3, 2), "sequences_per_s": round(batch / seconds, 1),
                                 "gflop_per_s": round(gflops, 1), "share_of_peak": round(gflops / peak, 3)})
                    if by_threads:
                        rows[-1]["ms_by_threads"] = {t: round(v * 1e3, 2) for t, v in by_threads.items()}
                    print(f"  {name:<9} B={batch:<3} {peer:<16} {seconds * 1e3:9.1f} ms {batch / seconds:8.1f} seq/s "
                          f"{gflops:7.1f} GFLOP/s {100 * gflops / peak:5.1f}% of peak")
                ratio = ratios.setdefault(name, {})[f"batch_{batch}"] = {
                    f"{a}_over_{b}": round(timed[b] / timed[a], 3) for a in ("ours", "ours_xla")
                    for b in ("onnxruntime", "onnxruntime_int8", "pytorch") if a in timed and b in timed}
                for row in rows:     # and at ours' own thread count, which the best-of need not be
                    if (row["config"], row["batch"]) == (name, batch) and "ms_by_threads" in row and "ours" in timed:
                        ratio[f"ours_over_{row['peer']}_threads_{threads}"] = round(
                            row["ms_by_threads"][threads] / 1e3 / timed["ours"], 3)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    report = {"machine": {"cpu": cpu, "cores": os.cpu_count(), "threads": threads,
                          "python": platform.python_version(), "tensorflow": tf.__version__},
              "gemm_gflop_per_s": peaks, "gemm_peak_gflop_per_s": peak, "quick": args.quick, "runs": rows,
              "ratios": ratios, "onnxruntime": onnx_info, "onnx_checks": checks}
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
