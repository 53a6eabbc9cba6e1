"""Fine-tuning throughput: ours (TensorFlow and JAX) against keras-hub's BertTextClassifier and PyTorch, and
per-batch packing on SST-2.

    python benchmarks/benchmark_finetune.py [--steps 12] [--sst2 ../shared/data/SST-2/train.tsv] [--sst2-examples 1024]
                                       [--quick] [--skip keras_hub,jax,torch,sst2] [--precision fp32|bf16]
                                       [--out benchmarks/results/finetune.json]

Part 1 (issue #4's setting): training examples/s of a sentence classifier on the all-MiniLM-L6-v2 config
(6 layers, hidden 384), sequence length 128, batch 16, one full training step each (forward, loss, backward,
clipping to norm 1, AdamW with weight decay, the warm-up/linear-decay schedule), random weights and ids (the
speed does not depend on their values):
  - ours: `BertClassifier` + `create_optimizer`, Keras `train_on_batch` on TensorFlow (graph, and with
    `jit_compile=True`);
  - ours on JAX: the same model, optimizer and `train_on_batch` on Keras' JAX backend with `jit_compile=True`, one
    CPU device (no --xla_force_host_platform_device_count). Keras picks its backend once per process, so it runs in
    a subprocess of this script (`--jax-side`, KERAS_BACKEND=jax) that prints its JSON for this one to read;
  - keras-hub: `BertTextClassifier(preprocessor=None)` on a `BertBackbone` of the same config, compiled with
    AdamW (its compile picks XLA by itself);
  - PyTorch: transformers' `BertForSequenceClassification`, `torch.optim.AdamW`, `clip_grad_norm_`, all threads.
`--precision bf16`: every peer in bfloat16 mixed precision, as each framework does it: the Keras sides (ours on
TensorFlow and JAX, keras-hub) under the `mixed_bfloat16` policy (`finetune --mixed-precision mixed_bfloat16`:
bfloat16 compute, float32 weights and optimizer), PyTorch's forward and loss under
`torch.autocast("cpu", dtype=torch.bfloat16)` (transformers' `Trainer(bf16=True)` on a CPU), and the matmul
floor's rate in bfloat16. For CPUs with AVX512_BF16 or AMX, whose bfloat16 matmuls run about twice float32's.
Time: median seconds per step after two warm-up steps (tracing, XLA compilation), the same for every peer, all of
them in this process but the JAX side. The peers take turns in the order ours, ours_xla, ours_jax, torch,
keras_hub, so the three compared in `ratios` run back to back (this host's speed drifts). `ratios`: examples/s of
JAX / PyTorch, TensorFlow / PyTorch and JAX / TensorFlow, TensorFlow being ours with `jit_compile=True` (both
Keras sides compiled by XLA); `vs_torch` has every peer against PyTorch. The load average before and after part 1
is recorded beside them.

The matmul floor: the step's matmul GFLOP (counted from the config; ours computes the last layer for [CLS]
only, transformers for every token) against this machine's float32 matmul rate in TensorFlow on the
feed-forward's shapes. `share_of_matmul_rate` is each peer's matmul FLOP/s over that rate; `twice_torch_needs` the
share ours would need to run at twice PyTorch's examples/s (over 1.0 no kernel work reaches it).

Part 2: one epoch of real SST-2 training sentences through the in-graph preprocessor in tf.data, batches padded
to their longest sentence (the default) against every batch padded to 128, same model and optimizer. The first
epoch (which traces each new batch shape) and a second epoch are timed separately. Without --sst2 it uses the
1,000 phrases shipped in bert_keras/data/samples (no files outside the repository needed).
"""

from __future__ import annotations

import argparse
import json
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

SEQ, BATCH = 128, 16
MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536)
TINY = dict(vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)


def median_step(step, steps: int) -> float:
    step()
    step()                                             # warm-up: tracing, XLA compilation, allocator
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def random_batch(seed: int = 0):
    import numpy as np
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30000, (BATCH, SEQ)).astype("int32")
    return ids, np.ones_like(ids), np.zeros_like(ids), rng.integers(0, 2, BATCH).astype("int32")


def set_precision(precision: str) -> None:
    """The Keras policy of `precision` ("fp32" or "bf16"), before any model is built."""
    import keras
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bf16" else "float32")


def ours(c: dict, jit: bool, total_steps: int):
    import keras

    from bert_keras import BertConfig, BertEncoder
    from bert_keras.tasks import BertClassifier
    from bert_keras.training import create_optimizer
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(BertConfig(**c)), num_classes=2)
    model.compile(optimizer=create_optimizer(5e-5, total_steps),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    ids, mask, types, labels = random_batch()
    x = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    return lambda: model.train_on_batch(x, labels)


def ours_jax(quick: bool, steps: int, precision: str = "fp32") -> dict:
    """Runs this script's --jax-side in a fresh process on Keras' JAX backend (one CPU device); -> its JSON."""
    import subprocess
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO)}
    flags = [f for f in env.pop("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    if flags:
        env["XLA_FLAGS"] = " ".join(flags)
    argv = [sys.executable, __file__, "--jax-side", "--steps", str(steps), "--precision", precision,
            *(["--quick"] if quick else [])]
    process = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    if process.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def jax_side(c: dict, steps: int, total_steps: int) -> dict:
    """The JAX peer in this process (KERAS_BACKEND=jax): ours() with jit_compile=True, timed as the others."""
    import jax
    import keras
    if keras.backend.backend() != "jax":
        raise SystemExit(f"--jax-side runs on Keras' JAX backend, not {keras.backend.backend()}")
    seconds = median_step(ours(c, True, total_steps), steps)
    return {"seconds": seconds, "backend": keras.backend.backend(), "jax": jax.__version__,
            "keras": keras.__version__, "devices": [str(d) for d in jax.devices()],
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def keras_hub(c: dict, total_steps: int):
    import keras
    import keras_hub
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=c["vocab_size"], num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
        hidden_dim=c["hidden_size"], intermediate_dim=c["intermediate_size"], max_sequence_length=512)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    schedule = keras.optimizers.schedules.PolynomialDecay(5e-5, total_steps, 0.0)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ids, mask, types, labels = random_batch()
    x = {"token_ids": ids, "padding_mask": mask, "segment_ids": types}
    return lambda: model.train_on_batch(x, labels)


def pytorch(c: dict, total_steps: int, precision: str = "fp32"):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    model = BertForSequenceClassification(BertConfig(num_labels=2, **c)).train()
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=5e-5, eps=1e-6)
    sched = get_linear_schedule_with_warmup(opt, total_steps // 10, total_steps)
    ids, mask, types, labels = (torch.from_numpy(a).long() for a in random_batch())

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        return float(loss)
    return step


def sst2_epochs(c: dict, path: str, examples: int, seq_length: int | None, vocab: str, jit: bool) -> dict:
    """Two epochs of our classifier on the first `examples` SST-2 sentences; seconds and tokens per epoch."""
    import keras
    import numpy as np

    from bert_keras import BertConfig, BertEncoder, BertPreprocessor
    from bert_keras.finetune.registry import get_task
    from bert_keras.tasks import BertClassifier
    from bert_keras.training import create_optimizer
    keras.utils.set_random_seed(0)
    task = get_task("sst-2")
    train = task.read(path)[:examples]
    preprocessor = BertPreprocessor(vocab, lower_case=True, seq_length=seq_length)
    model = BertClassifier(BertEncoder(BertConfig(**c)), num_classes=2, preprocessor=preprocessor)
    ds = task.dataset(train, model, BATCH, training=True, seed=0)
    steps = int(ds.cardinality())
    padded = [int(x["input_word_ids"].shape[1]) for x, _ in ds]
    model.compile(optimizer=create_optimizer(5e-5, 2 * steps), jit_compile=jit, **task.compile_args())
    times = []
    for _ in range(2):
        t = time.perf_counter()
        model.fit(ds, epochs=1, verbose=0)
        times.append(time.perf_counter() - t)
    return {"examples": steps * BATCH, "steps": steps, "mean_padded_length": round(float(np.mean(padded)), 1),
            "distinct_shapes": len(set(padded)), "first_epoch_s": round(times[0], 2),
            "second_epoch_s": round(times[1], 2),
            "examples_per_s": round(steps * BATCH / times[1], 2)}


def step_gflop(c: dict, cls_only_last_layer: bool) -> float:
    """GFLOP of one training step's matmuls (forward, and twice that backward: gradients of inputs and weights):
    the projections, feed-forward and attention of every layer, and the pooler; `cls_only_last_layer`: the last
    layer computes keys and values for every token but the rest for [CLS] only (ours; transformers computes it
    all). Embedding lookups, LayerNorm, softmax, GELU and the optimizer are left out: a floor, not the step."""
    t, h, i, layers = BATCH * SEQ, c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    full = t * (4 * h * h + 2 * h * i) + 2 * BATCH * SEQ * SEQ * h
    last = (t * 2 * h * h + BATCH * (2 * h * h + 2 * h * i) + 2 * BATCH * SEQ * h) if cls_only_last_layer else full
    macs = (layers - 1) * full + last + BATCH * h * h
    return 3 * 2 * macs / 1e9


def matmul_gflops(c: dict, seconds: float = 3.0, precision: str = "fp32") -> float:
    """This machine's float32 (bf16: bfloat16) matmul rate on the step's feed-forward shapes ([B*S, H] x [H, I]
    and back), in TensorFlow (oneDNN), on all threads: the rate a step of only matmuls could reach."""
    import tensorflow as tf
    t, h, i = BATCH * SEQ, c["hidden_size"], c["intermediate_size"]
    dtype = tf.bfloat16 if precision == "bf16" else tf.float32
    x, w1, w2 = (tf.cast(tf.random.normal(s), dtype) for s in ((t, h), (h, i), (i, h)))

    @tf.function
    def chain(x):
        for _ in range(8):
            x = tf.matmul(tf.matmul(x, w1), w2)
        return x
    chain(x).numpy()
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        chain(x).numpy()
        runs += 1
    return runs * 8 * 2 * (2 * t * h * i) / (time.perf_counter() - start) / 1e9


def matmul_cpu_flags() -> list[str]:
    """The matmul-relevant instruction sets this CPU reports (savedmodels.precision.cpu_flags: /proc/cpuinfo)."""
    from savedmodels.precision import cpu_flags
    flags = cpu_flags()
    return [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if f in flags]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=12, help="timed steps per peer in part 1")
    p.add_argument("--sst2", default=str(REPO / "bert_keras" / "data" / "samples" / "sst2_train.tsv"),
                   help="an SST-2 train.tsv (default: the shipped 1,000-phrase sample)")
    p.add_argument("--sst2-examples", type=int, default=1024)
    p.add_argument("--quick", action="store_true", help="tiny config, few steps: checks the script runs")
    p.add_argument("--skip", default="", help="comma-separated peers to leave out: keras_hub,jax,torch,sst2")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: every peer in bfloat16 mixed precision (see above)")
    p.add_argument("--out", default=None, help="default: benchmarks/results/finetune.json "
                                                "(finetune_bf16.json with --precision bf16)")
    p.add_argument("--jax-side", action="store_true",
                   help="internal: time ours on Keras' JAX backend in this process, print JSON (see ours_jax)")
    args = p.parse_args(argv)
    c = TINY if args.quick else MINILM
    steps = 3 if args.quick else args.steps
    skip = set(filter(None, args.skip.split(",")))
    total = 1000
    os.environ["KERAS_BACKEND"] = "jax" if args.jax_side else "tensorflow"      # before anything imports Keras
    set_precision(args.precision)
    args.out = args.out or str(REPO / "benchmarks" / "results" /
                               ("finetune_bf16.json" if args.precision == "bf16" else "finetune.json"))
    if args.jax_side:
        print(json.dumps(jax_side(c, steps, total)), flush=True)
        return
    results = {"config": c, "seq_length": SEQ, "batch_size": BATCH, "timed_steps": steps, "precision": args.precision,
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "cpu_flags": matmul_cpu_flags()},
               "examples_per_s": {},
               "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    peers = {"ours": lambda: ours(c, False, total), "ours_xla": lambda: ours(c, True, total),
             "ours_jax": None, "torch": lambda: pytorch(c, total, args.precision),
             "keras_hub": lambda: keras_hub(c, total)}
    for name, make in peers.items():
        if name in skip or (name == "ours_jax" and "jax" in skip):
            continue
        if name == "ours_jax":
            side = ours_jax(args.quick, steps, args.precision)
            seconds = side.pop("seconds")
            results["jax_side"] = side
        else:
            seconds = median_step(make(), steps)
        results["examples_per_s"][name] = round(BATCH / seconds, 2)
        print(f"{name:10s} {BATCH / seconds:8.2f} examples/s  ({seconds * 1000:.0f} ms/step)", flush=True)
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    speed = results["examples_per_s"]
    if "torch" in speed:
        results["vs_torch"] = {k: round(v / speed["torch"], 2) for k, v in speed.items() if k != "torch"}
        print("vs torch:", results["vs_torch"])
    pairs = {"jax_vs_torch": ("ours_jax", "torch"), "tf_vs_torch": ("ours_xla", "torch"),
             "jax_vs_tf": ("ours_jax", "ours_xla")}
    results["ratios"] = {k: round(speed[a] / speed[b], 2) for k, (a, b) in pairs.items() if a in speed and b in speed}
    rate = matmul_gflops(c, 1.0 if args.quick else 5.0, args.precision)
    flop = {"ours": step_gflop(c, True), "torch": step_gflop(c, False)}
    results["matmul_floor"] = {
        "matmul_gflops": round(rate, 1), "step_gflop": {k: round(v, 1) for k, v in flop.items()},
        # each peer's step matmul FLOP/s as a share of the machine's matmul rate
        "share_of_matmul_rate": {k: round(flop["torch" if k == "torch" else "ours"] * v / BATCH / rate, 3)
                                 for k, v in speed.items() if k != "keras_hub"},
        # what twice PyTorch's examples/s would take of ours: over 1.0 cannot be reached by faster kernels
        "twice_torch_needs": round(2 * speed["torch"] * flop["ours"] / BATCH / rate, 3) if "torch" in speed else None}
    print("matmul floor:", results["matmul_floor"])
    print("ratios:", results["ratios"], " load average before/after:", results["load_average_before"],
          results["load_average_after"])
    if "sst2" not in skip:
        from bert_keras.loading import bundled_minilm_folder
        vocab = os.path.join(bundled_minilm_folder(), "vocab.txt")
        jit = False     # fine-tuning's default: XLA needs static shapes, so it would compute the padding again
        n = 64 if args.quick else args.sst2_examples
        sst2 = {"file": args.sst2, "jit_compile": jit,
                "packed": sst2_epochs(c, args.sst2, n, None, vocab, jit),
                "fixed_128": sst2_epochs(c, args.sst2, n, SEQ, vocab, jit)}
        sst2["speedup_second_epoch"] = round(sst2["packed"]["examples_per_s"] / sst2["fixed_128"]["examples_per_s"],
                                             2)
        sst2["speedup_first_epoch"] = round(sst2["fixed_128"]["first_epoch_s"] / sst2["packed"]["first_epoch_s"], 2)
        results["sst2_packing"] = sst2
        print("SST-2 packed vs fixed 128:", json.dumps(sst2, indent=1))
    from bert_keras.atomic import write_json
    write_json(args.out, results)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
