"""The attention's head swap ([B, S, N, D] <-> [B, N, S, D]) three ways, on TensorFlow's CPU runtime with oneDNN on.

    python benchmarks/benchmark_head_swap.py            # JSON in benchmarks/results/head_swap.json

`layers.swap_heads` moves the bits through a view: float64 (the default), the same-width integer (LiteRT, TPUs),
against a plain float Transpose (which oneDNN rewrites to _MklTranspose). Each function chains 24 swaps, each
followed by an add (one MiniLM request's worth: 6 layers x 4 swaps), so the per-call overhead of tf.function
is shared; shapes are a batch-1 request ([1, 16, 12, 32]) and a training batch ([32, 128, 12, 32]). Rounds
interleave the three, and each figure is the best round's mean per call; ratios are against the plain transpose
in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=str(RESULTS / "head_swap.json"))
    args = p.parse_args(argv)
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    import tensorflow as tf
    from bert_keras.layers import integer_head_swaps, swap_heads

    def chain(swap):
        def run(x):
            for _ in range(24):
                x = swap(x) + 1.0
            return x
        return run

    def traced(swap, x, integer=False):
        function = tf.function(chain(swap))
        if integer:
            with integer_head_swaps():                  # traced here for x's shape, so calls reuse this graph
                function.get_concrete_function(x)
        return function

    results = {"command": "python benchmarks/benchmark_head_swap.py", "shapes": {}}
    for shape, calls in (([1, 16, 12, 32], 300), ([32, 128, 12, 32], 10)):
        x = tf.random.normal(shape)
        ways = {"float64_view": traced(swap_heads, x), "integer_view": traced(swap_heads, x, integer=True),
                "plain_transpose": traced(lambda t: tf.transpose(t, (0, 2, 1, 3)), x)}
        views = {}
        for name, function in ways.items():
            function(x)
            graph = function.get_concrete_function(x).graph         # the graph the calls run: its transposes' dtypes
            views[name] = sorted({op.get_attr("T").name for op in graph.get_operations() if op.type == "Transpose"})
        best = {}
        for _ in range(args.rounds):
            for name, function in ways.items():
                start = time.perf_counter()
                for _ in range(calls):
                    function(x)
                best[name] = min(best.get(name, float("inf")), (time.perf_counter() - start) / calls * 1e6)
        row = {f"{name}_us": round(value, 1) for name, value in best.items()}
        row.update({f"{name}_speedup_vs_plain": round(best["plain_transpose"] / best[name], 2)
                    for name in ("float64_view", "integer_view")})
        row["transpose_dtypes"] = views
        results["shapes"][str(shape)] = row
        print(shape, row, flush=True)
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, args.out)
    return results


if __name__ == "__main__":
    main()
