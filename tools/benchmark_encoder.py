"""Encoder forward throughput: ours (with and without XLA) against keras-hub, PyTorch and onnxruntime.

    python tools/benchmark_encoder.py [--configs minilm,bert_base] [--batch-sizes 1,32] [--quick]
                                      [--out benchmarks/results/encoder.json]

All peers run in this process on the same config, sequence length 128 and random weights (throughput does not
depend on their values). FLOPs are counted analytically (2 per multiply-add: Q/K/V/output projections, attention
scores and weighted values, feed-forward, pooler) and reported as GFLOP/s and as a share of the machine's fp32
GEMM peak, measured here as the best of tf.matmul (graph and XLA), NumPy and PyTorch on a 2048^3 product.
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


def _torch_model(c):
    import torch
    from transformers import BertConfig, BertModel
    torch.set_num_threads(os.cpu_count())
    return BertModel(BertConfig(vocab_size=30522, **c)).eval()


def torch_bert(c, batch):
    import torch
    model = _torch_model(c)
    ids = torch.randint(1000, 30000, (batch, SEQ))
    mask = torch.ones_like(ids)

    def run():
        with torch.inference_mode():
            return model(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
    return run


def onnx_bert(c, batch, folder):
    import numpy as np
    import onnxruntime
    import torch
    model = _torch_model(c)
    path = os.path.join(folder, f"bert_{c['hidden_size']}_{c['num_hidden_layers']}.onnx")
    if not os.path.exists(path):
        class ByKeyword(torch.nn.Module):            # transformers 5 reordered forward()'s positional arguments
            def __init__(self, bert):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask):
                return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        ids = torch.randint(1000, 30000, (1, SEQ))
        torch.onnx.export(ByKeyword(model), (ids, torch.ones_like(ids)), path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], dynamo=False,
                          dynamic_axes={"input_ids": {0: "b"}, "attention_mask": {0: "b"}})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count()
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feed = {"input_ids": np.random.randint(1000, 30000, (batch, SEQ)).astype("int64"),
            "attention_mask": np.ones((batch, SEQ), "int64")}
    return lambda: session.run(None, feed)[0]


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
    rows = []
    with tempfile.TemporaryDirectory() as onnx_dir:
        for name in args.configs.split(","):
            c = CONFIGS[name]
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                peers = {"ours": lambda: ours(c, batch, False), "ours_xla": lambda: ours(c, batch, True),
                         "keras_hub_xla": lambda: keras_hub_backbone(c, batch),
                         "pytorch": lambda: torch_bert(c, batch),
                         "onnxruntime": lambda: onnx_bert(c, batch, onnx_dir)}
                flops = forward_flops(c, batch)
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
                    seconds = measure(run, repeats, budget)
                    gflops = flops / seconds / 1e9
                    rows.append({"config": name, "batch": batch, "seq": SEQ, "peer": peer,
                                 "ms": round(seconds * 1e3, 2), "sequences_per_s": round(batch / seconds, 1),
                                 "gflop_per_s": round(gflops, 1), "share_of_peak": round(gflops / peak, 3)})
                    print(f"  {name:<9} B={batch:<3} {peer:<14} {seconds * 1e3:9.1f} ms {batch / seconds:8.1f} seq/s "
                          f"{gflops:7.1f} GFLOP/s {100 * gflops / peak:5.1f}% of peak")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    report = {"machine": {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
                          "tensorflow": tf.__version__},
              "gemm_gflop_per_s": peaks, "gemm_peak_gflop_per_s": peak, "quick": args.quick, "runs": rows}
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
