"""What `encoder(inputs, attention_maps=True)` costs, and that off it costs nothing (issue 42).

    python benchmarks/benchmark_attention_maps.py       # JSON in benchmarks/results/attention_maps.json

Three forward passes of one encoder (MiniLM's shape: 6 layers, H 384, 12 heads; random weights, the time does not
depend on their values), each a tf.function returning every output as NumPy, in this process:
  reference  the encoder as it was before the option: TransformerBlock.call and run_layers copied here from before
             the change (ReferenceBlock, reference_run_layers), built into a functional model the way
             BertEncoder.__init__ built it, with the same weights;
  off        today's encoder, called without the option;
  on         today's encoder with attention_maps=True, the L maps [B, N, S, S] returned as well.
Off must be the reference: the outputs are asserted bit-identical and the traced graphs' op types are compared
(counts in the JSON). Shapes: a serving request (batch 1, 16 tokens) and a batch (8 texts of 40 to 128 tokens,
padded to 128). Rounds interleave the three (in a rotating order); each figure is a round's mean per call, the
best round's ("ms", what the ratios use: least disturbed by other work on a shared machine) and the median
round's ("median_ms", "median_ratios"); ratios are against the reference (and on/off) in the same process.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import pathlib
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "benchmarks" / "results"
MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)


def reference_block_class():
    """TransformerBlock with its `call` as it was before `return_attention` (a verbatim copy)."""
    from keras import ops

    from bert_keras.layers import RealTokens, TransformerBlock, _reshape_target, attention_bias, swap_heads

    class ReferenceBlock(TransformerBlock):
        def call(self, x, input_mask, training=False, cls_only=False):
            b, s = ops.shape(x)[0], ops.shape(x)[1]
            tokens = RealTokens(input_mask)
            h = tokens.gather(x)
            q, k, v = (self._split_heads(t) for t in self._queries_keys_values(x, h, tokens, b, s, cls_only))
            scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / self.head_size ** 0.5)
            probs = ops.softmax(ops.cast(scores, "float32") + attention_bias(input_mask), axis=-1)
            probs = self.attention_probs_dropout(ops.cast(probs, v.dtype), training=training)
            context = swap_heads(ops.matmul(probs, v))
            context = ops.reshape(context, _reshape_target(context, (self.hidden_size,), keep=1))
            if cls_only:
                h, context = x[:, 0], context[:, 0]
            else:
                context = tokens.gather(context)
            attended = self.output_dropout(self.attention_output(context), training=training)
            h = self.attention_norm(h + ops.cast(attended, h.dtype))
            ffn = self.output_dropout(self.output_dense(self.intermediate(h)), training=training)
            out = self.output_norm(h + ops.cast(ffn, h.dtype))
            return out[:, None] if cls_only else tokens.scatter(out, b, s)
    return ReferenceBlock


def reference_run_layers(embeddings, blocks, inputs, training=None, cls_only=False) -> list:
    """bert_keras.encoder.run_layers before `attention_maps` (a verbatim copy)."""
    x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"], training=training)
    outputs = []
    for i, block in enumerate(blocks):
        x = block(x, inputs["input_mask"], training=training, cls_only=cls_only and i == len(blocks) - 1)
        outputs.append(x)
    return outputs


def reference_encoder(encoder):
    """The functional model BertEncoder.__init__ built before the option, on `encoder`'s weights."""
    import keras
    from keras import ops

    from bert_keras.encoder import INPUT_NAMES
    block_class = reference_block_class()
    blocks = []
    for block in encoder.transformer_layers:
        copy = block_class.from_config(block.get_config())
        copy.build()
        copy.set_weights(block.get_weights())
        blocks.append(copy)
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
    layer_outputs = reference_run_layers(encoder.embeddings, blocks, inputs)
    x = layer_outputs[-1]
    outputs = {"sequence_output": x,
               "pooled_output": ops.cast(encoder.pooler(x[:, 0, :]), "float32"),
               "encoder_outputs": layer_outputs}
    return keras.Model(inputs=inputs, outputs=outputs)


def batch(size: int, seq: int, shortest: int, seed: int = 0) -> dict:
    import numpy as np
    rng = np.random.default_rng(seed)
    lengths = rng.integers(shortest, seq + 1, size=size)
    lengths[0] = seq
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    ids = rng.integers(1000, 30000, size=(size, seq)).astype("int32") * mask
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def op_types(function, x) -> collections.Counter:
    """The op types of the graph `function` runs on x, counted (the nested function bodies Keras makes too)."""
    graph = function.get_concrete_function(x).graph
    counts = collections.Counter(op.type for op in graph.get_operations())
    for f in graph._functions.values():             # noqa: SLF001  (the bodies of nested tf.functions)
        counts.update(node.op for node in f.definition.node_def)
    return counts


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--out", default=str(RESULTS / "attention_maps.json"))
    args = p.parse_args(argv)

    import keras
    import numpy as np
    import tensorflow as tf

    from bert_keras import BertConfig, BertEncoder
    from bert_keras.atomic import write_json
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(BertConfig(**MINILM))
    reference = reference_encoder(encoder)
    as_numpy = lambda out: tf.nest.map_structure(lambda t: t.numpy(), out)  # noqa: E731
    functions = {"reference": tf.function(lambda t: reference(t, training=False)),
                 "off": tf.function(lambda t: encoder(t, training=False)),
                 "on": tf.function(lambda t: encoder(t, training=False, attention_maps=True))}
    report = {"command": "python benchmarks/benchmark_attention_maps.py", "date": datetime.date.today().isoformat(),
              "config": MINILM, "rounds": args.rounds,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "tensorflow": tf.__version__,
                          "keras": keras.__version__},
              "load_average_before": [round(v, 2) for v in os.getloadavg()], "shapes": {}}
    for name, (size, seq, shortest, calls) in {"request_b1_s16": (1, 16, 16, 20),
                                               "batch_b8_s128": (8, 128, 40, 3)}.items():
        x = batch(size, seq, shortest)
        outs = {k: as_numpy(f(x)) for k, f in functions.items()}          # traces, and warms up
        for key in ("sequence_output", "pooled_output"):
            np.testing.assert_array_equal(outs["off"][key], outs["reference"][key])
            np.testing.assert_array_equal(outs["on"][key], outs["reference"][key])
        assert len(outs["on"]["attention_maps"]) == MINILM["num_hidden_layers"]
        ops = {k: op_types(f, x) for k, f in functions.items()}
        times = {k: [] for k in functions}
        names = list(functions)
        for r in range(args.rounds):
            for k in names[r % 3:] + names[:r % 3]:
                f = functions[k]
                start = time.perf_counter()
                for _ in range(calls):
                    as_numpy(f(x))
                times[k].append((time.perf_counter() - start) / calls)
        ms = {k: min(v) * 1e3 for k, v in times.items()}
        median = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        ratios = lambda t: {"off_over_reference": round(t["off"] / t["reference"], 3),  # noqa: E731
                            "on_over_reference": round(t["on"] / t["reference"], 3),
                            "on_over_off": round(t["on"] / t["off"], 3)}
        row = {"batch": size, "seq": seq, "real_tokens": int(x["input_mask"].sum()),
               "ms": {k: round(v, 3) for k, v in ms.items()}, "ratios": ratios(ms),
               "median_ms": {k: round(v, 3) for k, v in median.items()}, "median_ratios": ratios(median),
               "outputs_bit_identical": True,
               "graph_op_types_off_equal_reference": ops["off"] == ops["reference"],
               "graph_ops": {k: sum(v.values()) for k, v in ops.items()},
               "graph_ops_only_on": dict(ops["on"] - ops["off"])}
        report["shapes"][name] = row
        print(name, row, flush=True)
    report["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    write_json(args.out, report)
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
