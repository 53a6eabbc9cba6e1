"""Packed against unpacked pretraining (issue 49, item 5): rows/s, sequences/s and real tokens/s of the
pretraining train step, and the compiled JAX step's FLOPs per real token against the model's own count, in one run.

    nice -n 10 python benchmarks/benchmark_packing.py [--preset bert_tiny] [--steps 8] [--warmup 2]
                                                       [--jax-path FOLDER] [--data NAME ...]
                                                       [--sides tensorflow_x1 jax_x1 jax_x8]
                                                       [--flops-presets bert_base bert_large]
                                                       [--out benchmarks/results/packing.json]

Data (built here, each packed and unpacked; the same sequences both ways):
  (a) short documents: the 1,048 SQuAD v1.1 paragraphs of ../shared/data/squad/train-split-v1.1.json (about 120
      words each), one document each (sentences split at . ! ? followed by a space), through `pretraining-data`'s
      code (create_pretraining_data, MiniLM's uncased vocabulary, dupe factor 1, seed 1) at 128 (20 predictions)
      and 512 (80), with and without --pack;
  (b) Wikipedia-like: 4,096 synthetic instances at 512 whose lengths are drawn from the published Wikipedia-512
      histogram (tests/pretraining/wikipedia_histogram.py; random word pieces, [CLS] A [SEP] B [SEP], 15% of the
      tokens masked, at most 80), packed by packing.pack_lengths + packed_records.pack_instances (what
      `pretraining-data --pack` does). The histogram is 512's, so (b) is at 512 only.
Packed rows carry packed_records.packed_prediction_slots MLM slots (the most any row can need: 78 at 512 with 80
predictions, 21 at 128 with 20; before e5c345f they carried 3 x max_predictions_per_seq, 240 and 60, and this
script also timed a "packed_trimmed" variant with the slots cut to what the rows use, which packed now is).
--data and --sides choose a subset.
Steps: BertPretrainer (MLM + NSP, AdamW) of --preset with random weights, `train_on_batch` as `pretrain` runs it:
TensorFlow without XLA (its default: the padding skip on), JAX under XLA on 1 CPU device and on 8 simulated ones
(XLA_FLAGS=--xla_force_host_platform_device_count=8, keras.distribution.DataParallel); each side a fresh process.
Packed batches have B rows drawn at random (seeded) from the packed data, as many rows of 1, 2 and 3 sequences as
the data's proportions (representative_rows); unpacked batches hold the same
sequences in order, round(their sequences a step) rows a step (a multiple of 8), so a step trains on about as
many sequences both ways and the timed steps on the same ones. Each side builds a packed and an unpacked model
(same seed), runs --warmup untimed steps on each, then --steps timed steps of each interleaved (packed, unpacked,
unpacked, packed, ...), so that a change in the host's load between steps falls on both; the throughputs count
what the timed batches hold (rows, sequences = present next_sentence_weights or rows, real tokens = input_mask
ones); each step's seconds are kept in the results.
FLOPs: the JAX side (1 device) lowers Keras' own train step (model.train_step under jax.jit: forward, backward,
AdamW) on one batch and reads XLA's cost analysis; per real token = flops / the mean real tokens of a step.
--flops-presets: the same, compile only (no step is run), for larger presets on (b)'s packed and unpacked
batches; plus a check of the count below against XLA's forward-only FLOPs of the first of them on rows without
padding (every token real, every MLM slot used, so the count and XLA compute the same matmuls), and XLA's FLOPs
of one dense matmul (2 m k n expected).
The model's own count per real token (forward + backward = 3 x forward; matmuls 2 FLOPs per multiply-add):
    3 x [ 2 L (4 H^2 + 2 H I)                        # Q, K, V, output projections and the feed-forward, per token
          + 4 L H (sum_s l_s^2) / T                  # Q.K^T and attention x V over each token's own sequence
          + (P / T) (2 H^2 + 2 H V)                  # MLM transform and decoder at the P real predictions
          + (N / T) (2 H^2 + 4 H) ]                  # pooler and NSP at the N sequences
with L layers, hidden H, intermediate I, vocabulary V, T real tokens, sequences of l_s tokens; elementwise work
(softmax, GELU, layer norm, the optimizer) is left out of it and is in XLA's count. The results also give the
count with attention over whole rows (sum over rows of S^2 instead of sum_s l_s^2: what the packed step's
block-diagonal bias computes, as it masks other sequences' keys instead of skipping them).
That count leaves the elementwise work out, so XLA's step is above it even with nothing packed or padded (1.06x at
bert_tiny). The JAX x1 side therefore also measures the model's own work as XLA counts it (--one-by-one-steps,
one_by_one): the sequences of the first timed packed steps, each compiled alone at its own length with its own
predictions; packed ÷ that is what packing's static shapes add, elementwise work included on both sides.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "pretraining"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SQUAD = pathlib.Path(os.environ.get("BERT_KERAS_SHARED_DATA", REPO.parent / "shared" / "data")) / "squad" / \
    "train-split-v1.1.json"
PREDICTIONS = {128: 20, 512: 80}
PACKED_ROWS = {128: 16, 512: 8}          # packed rows a step; unpacked rows: the same sequences
DATA = ("short_documents_128", "short_documents_512", "wikipedia_like_512")
KINDS = ("packed", "unpacked")
SIDES = (("tensorflow", 1), ("jax", 1), ("jax", 8))
WIKI_SEQUENCES = 4096


# ---------------------------------------------------------------------------------------------------- the data

def squad_documents(path: str) -> int:
    """SQuAD's paragraphs as google-research's input (a sentence a line, a blank line between documents)."""
    data = json.load(open(SQUAD, encoding="utf-8"))
    paragraphs = [p["context"] for article in data["data"] for p in article["paragraphs"]]
    with open(path, "w", encoding="utf-8") as f:
        for text in paragraphs:
            sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]
            f.write("\n".join(sentences) + "\n\n")
    return len(paragraphs)


def read_records(files: list[str], seq: int, predictions: int, packed: bool) -> dict:
    import numpy as np
    import tensorflow as tf
    from bert_keras.pretraining.packed_records import packed_feature_spec
    from bert_keras.pretraining.records import feature_spec, packed_record_slots
    spec = packed_feature_spec(seq, packed_record_slots(files)) if packed else feature_spec(seq, predictions)
    parts = [tf.io.parse_example(b, spec) for b in tf.data.TFRecordDataset(files).batch(1024)]
    return {name: np.concatenate([p[name].numpy() for p in parts]) for name in spec}


def short_document_data(tmp: str, vocab: str, seq: int) -> tuple[dict, dict, dict]:
    from bert_keras import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    corpus = os.path.join(tmp, "squad_documents.txt")
    documents = squad_documents(corpus)
    config = MaskingConfig(max_seq_length=seq, max_predictions_per_seq=PREDICTIONS[seq], dupe_factor=1)
    out, seconds = {}, {}
    for pack in (False, True):
        start = time.perf_counter()
        made = create_pretraining_data([corpus], BertPreprocessor(vocab), os.path.join(tmp, f"squad{seq}{pack}"),
                                       1, config, seed=1, workers=1, pack=pack)
        seconds[pack] = round(time.perf_counter() - start, 2)
        out[pack] = read_records(made["files"], seq, PREDICTIONS[seq], pack)
    info = {"corpus": "SQuAD v1.1 train-split paragraphs, one document each", "documents": documents,
            "pretraining_data_seconds": {"unpacked": seconds[False], "packed": seconds[True]}}
    return out[False], out[True], info


def wikipedia_like_data(vocab_size: int, seed: int = 0) -> tuple[dict, dict, dict]:
    import numpy as np
    from bert_keras.pretraining.packed_records import pack_instances, packed_prediction_slots
    from bert_keras.pretraining.packing import pack_lengths
    from wikipedia_histogram import WIKIPEDIA_512
    seq, predictions = 512, PREDICTIONS[512]
    rng = np.random.default_rng(seed)
    histogram = np.asarray(WIKIPEDIA_512, np.float64)
    lengths = rng.choice(np.arange(1, seq + 1), size=WIKI_SEQUENCES, p=histogram / histogram.sum())
    lengths = np.maximum(lengths, 5)
    n = len(lengths)
    column = np.arange(seq)
    real = column < lengths[:, None]
    ids = np.where(real, rng.integers(1000, vocab_size, (n, seq)), 0)
    first_b = lengths // 2
    ids[:, 0] = 101                                                      # [CLS] A [SEP] B [SEP]
    ids[np.arange(n), first_b - 1] = 102
    ids[np.arange(n), lengths - 1] = 102
    segments = np.where(real & (column >= first_b[:, None]), 1, 0)
    features = {"input_ids": ids, "input_mask": real.astype(np.int64), "segment_ids": segments,
                "masked_lm_positions": np.zeros((n, predictions), np.int64),
                "masked_lm_ids": np.zeros((n, predictions), np.int64),
                "masked_lm_weights": np.zeros((n, predictions), np.float32),
                "next_sentence_labels": rng.integers(0, 2, (n, 1))}
    for i, length in enumerate(lengths):
        candidates = np.setdiff1d(np.arange(1, length - 1), [first_b[i] - 1])
        k = min(predictions, max(1, int(round(0.15 * length))), len(candidates))
        chosen = np.sort(rng.choice(candidates, k, replace=False))
        features["masked_lm_positions"][i, :k] = chosen
        features["masked_lm_ids"][i, :k] = ids[i, chosen]
        features["masked_lm_weights"][i, :k] = 1.0
        features["input_ids"][i, chosen] = 103                            # [MASK]
    packed = pack_instances(features, pack_lengths(lengths, seq), packed_prediction_slots(seq, predictions, 0.15))
    return features, packed, {"corpus": f"{n} synthetic instances, lengths drawn from the Wikipedia-512 histogram"}


def describe(unpacked: dict, packed: dict) -> dict:
    rows, sequences = len(packed["input_ids"]), len(unpacked["input_ids"])
    seq = unpacked["input_ids"].shape[1]
    real = int(unpacked["input_mask"].sum())
    return {"sequences": sequences, "packed_rows": rows, "sequences_per_row": round(sequences / rows, 4),
            "padding_unpacked": round(1 - real / (sequences * seq), 4),
            "padding_packed": round(1 - real / (rows * seq), 4)}


# ------------------------------------------------------------------------------------------------- one side

def load_batches(path: str, count: int) -> list[tuple[dict, dict]]:
    """The `count` batches save_batches wrote to `path`, as the model's (x, y) numpy dicts."""
    import numpy as np
    import tensorflow as tf
    from bert_keras.pretraining.dataset import model_batch
    data = np.load(path)
    batches = []
    for i in range(count):
        features = {k[len("b%d_" % i):]: data[k] for k in data.files if k.startswith("b%d_" % i)}
        x, y = model_batch({k: tf.constant(v) for k, v in features.items()})
        batches.append(({k: v.numpy() for k, v in x.items()}, {k: v.numpy() for k, v in y.items()}))
    return batches


def pretrainer(config, backend: str):
    """A compiled BertPretrainer of `config` (seed 0), as `pretrain` builds it (AdamW; XLA on JAX)."""
    import keras
    from bert_keras import BertEncoder
    from bert_keras.tasks import BertPretrainer
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(config))
    model.compile(optimizer=keras.optimizers.AdamW(1e-4), jit_compile=backend == "jax")
    return model


def side(args) -> dict:
    """Runs in its own process (KERAS_BACKEND, XLA_FLAGS set by the parent): times the train step on the saved
    batches of each data set, packed and unpacked interleaved; on JAX with 1 device also the cost analysis."""
    import keras
    backend = keras.backend.backend()
    if backend == "jax" and args.devices > 1:
        import jax
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    from bert_keras import PRESETS
    config = PRESETS[args.preset]
    results = {}
    for name in json.loads(args.sets):
        batches = {kind: load_batches(os.path.join(args.tmp, f"{name}_{kind}.npz"), args.warmup + args.steps)
                   for kind in KINDS}
        models = {kind: pretrainer(config, backend) for kind in KINDS}
        warm = {}
        for kind in KINDS:
            start = time.perf_counter()
            for x, y in batches[kind][:args.warmup]:
                models[kind].train_on_batch(x, y)
            warm[kind] = time.perf_counter() - start
        step_seconds, loss = {kind: [] for kind in KINDS}, {}
        for i in range(args.steps):
            for kind in (KINDS if i % 2 == 0 else KINDS[::-1]):
                x, y = batches[kind][args.warmup + i]
                start = time.perf_counter()
                loss[kind] = float(models[kind].train_on_batch(x, y, return_dict=True)["loss"])
                step_seconds[kind].append(time.perf_counter() - start)
        for kind in KINDS:
            timed, seconds = batches[kind][args.warmup:], sum(step_seconds[kind])
            rows = sum(len(x["input_word_ids"]) for x, _ in timed)
            sequences = sum(int((y["next_sentence_weights"] > 0).sum()) if "next_sentence_weights" in y
                            else len(x["input_word_ids"]) for x, y in timed)
            tokens = sum(int(x["input_mask"].sum()) for x, _ in timed)
            result = {"rows_per_step": len(timed[0][0]["input_word_ids"]), "steps": len(timed),
                      "seconds": round(seconds, 3), "step_seconds": [round(t, 3) for t in step_seconds[kind]],
                      "warmup_seconds": round(warm[kind], 2), "last_loss": loss[kind],
                      "rows_per_second": round(rows / seconds, 2),
                      "sequences_per_second": round(sequences / seconds, 2),
                      "real_tokens_per_second": round(tokens / seconds, 1)}
            if backend == "jax" and args.devices == 1:
                result.update(cost(models[kind], batches[kind][0], tokens / len(timed)))
                one_by_one_path = os.path.join(args.tmp, f"{name}_one_by_one.npz")
                if kind == "packed" and os.path.exists(one_by_one_path):
                    result["one_by_one"] = one_by_one(config, models[kind], batches[kind][0], one_by_one_path,
                                                      result["xla_flops_per_step"])
            results[f"{name}_{kind}"] = result
            print(name, kind, json.dumps(result), flush=True)
        del models
    return results


def flops_side(args) -> dict:
    """Runs in its own JAX process (1 device): compile-only cost analysis of the train step of each of
    --flops-presets on the saved packed and unpacked batches of `args.sets`' first data set; the count's check."""
    import gc
    import keras
    from bert_keras import PRESETS
    name = json.loads(args.sets)[0]
    batches = {kind: load_batches(os.path.join(args.tmp, f"{name}_{kind}.npz"), args.warmup + args.steps)
               for kind in KINDS}
    results = {"data": name, "presets": {}, "check": count_check(PRESETS[args.flops_presets[0]],
                                                                 batches["unpacked"][0])}
    print(json.dumps(results["check"]), flush=True)
    for preset in args.flops_presets:
        for kind in KINDS:
            timed = batches[kind][args.warmup:]
            tokens = sum(int(x["input_mask"].sum()) for x, _ in timed) / len(timed)
            start = time.perf_counter()
            model = pretrainer(PRESETS[preset], "jax")
            x, y = batches[kind][0]
            model._symbolic_build(data_batch=(x, y, None))            # variables, optimizer and metrics; no step
            result = cost(model, batches[kind][0], tokens)
            result.update(compile_seconds=round(time.perf_counter() - start, 1), rows_per_step=len(x["input_word_ids"]),
                          parameters=int(sum(math.prod(v.shape) for v in model.trainable_variables)))
            results["presets"].setdefault(preset, {})[kind] = result
            print(preset, kind, json.dumps(result), flush=True)
            del model
            keras.backend.clear_session()
            gc.collect()
    return results


def count_check(config, batch) -> dict:
    """The model's count against XLA on rows the count describes exactly: `batch`'s shapes with every token real
    (one sequence a row, input_mask all ones) and every MLM slot used; forward only (training=False), and the
    train step's FLOPs over the forward's. Also XLA's FLOPs for one (m, k) x (k, n) matmul against 2 m k n."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    x, y = batch
    x = {k: np.asarray(v).copy() for k, v in x.items()}
    y = {k: np.asarray(v).copy() for k, v in y.items()}
    rows, seq = x["input_mask"].shape
    x["input_mask"][:] = 1
    slots = x["masked_lm_positions"].shape[1]
    x["masked_lm_positions"][:] = np.arange(1, slots + 1)
    y["masked_lm_weights"][:] = 1
    model = pretrainer(config, "jax")
    model._symbolic_build(data_batch=(x, y, None))
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def forward(trainable, non_trainable, x):
        return model.stateless_call(trainable, non_trainable, x, training=False)[0]

    xla_forward = flops_of(jax.jit(forward).lower(trainable, non_trainable, x).compile())
    xla_step = cost(model, (x, y), 1.0)["xla_flops_per_step"]
    h, i, layers, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    t, p, n = rows * seq, rows * slots, rows
    parts = {"projections_and_feed_forward": t * 2 * layers * (4 * h * h + 2 * h * i),
             "attention": 4 * layers * h * rows * seq * seq,
             "mlm": p * (2 * h * h + 2 * h * v), "pooler_and_nsp": n * (2 * h * h + 4 * h)}
    count_forward = float(sum(parts.values()))
    m, k, nn = 512, 768, 3072
    matmul = flops_of(jax.jit(jnp.dot).lower(jnp.ones((m, k)), jnp.ones((k, nn))).compile())
    return {"config": {"layers": layers, "hidden": h, "intermediate": i, "vocabulary": v},
            "rows": rows, "max_seq_length": seq, "mlm_slots": slots,
            "count_forward_parts": parts, "count_forward": count_forward, "xla_forward": xla_forward,
            "xla_forward_over_count": round(xla_forward / count_forward, 4),
            "xla_train_step": xla_step, "xla_train_step_over_xla_forward": round(xla_step / xla_forward, 4),
            "xla_train_step_over_3x_count": round(xla_step / (3 * count_forward), 4),
            "matmul_512x768x3072": {"xla": matmul, "2mkn": 2 * m * k * nn}}


def one_by_one(config, packed_model, packed_batch, path: str, step_flops: float) -> dict:
    """The model's own work on the sequences of the first timed packed steps as XLA counts it: each sequence alone
    in a batch of one, at its own length with its own predictions (no padding, no other sequence in its
    attention, no empty MLM slot), forward and backward compiled by XLA, summed; plus the step's optimizer and
    metrics once a step (the packed train step's FLOPs less its forward and backward's). Unlike the module
    docstring's count it holds the elementwise work (softmax, GELU, layer norm, dropout), so packed ÷ this is
    what packing's static shapes add, and nothing else. `path`: save_one_by_one's npz."""
    import numpy as np
    import tensorflow as tf
    from bert_keras.pretraining.dataset import model_batch

    start = time.perf_counter()
    fixed = step_flops - gradient_flops(packed_model, *packed_batch)
    data = dict(np.load(path))
    steps, tokens = int(data.pop("steps")), 0
    model, total, cache = None, 0.0, {}
    for i in range(len(data["input_ids"])):
        length, predictions = int(data["input_mask"][i].sum()), int(data["masked_lm_weights"][i].sum())
        trimmed = {k: v[i:i + 1, :length] if v.shape[1] == data["input_ids"].shape[1]
                   else v[i:i + 1, :predictions] if k.startswith("masked_lm") else v[i:i + 1]
                   for k, v in data.items()}
        x, y = model_batch({k: tf.constant(v) for k, v in trimmed.items()})
        x, y = {k: v.numpy() for k, v in x.items()}, {k: v.numpy() for k, v in y.items()}
        if model is None:
            model = pretrainer(config, "jax")
            model._symbolic_build(data_batch=(x, y, None))
        if (length, predictions) not in cache:
            cache[length, predictions] = gradient_flops(model, x, y)
        total += cache[length, predictions]
        tokens += length
    reference = (total + steps * fixed) / tokens
    result = {"steps": steps, "sequences": len(data["input_ids"]), "compiles": len(cache),
              "optimizer_and_metrics_flops_per_step": fixed, "xla_flops_per_real_token": round(reference, 1),
              "packed_over_one_by_one": round(step_flops * steps / tokens / reference, 4)}
    # The check: a packed row that holds one sequence filling the row is the same work as that sequence alone
    # (but for its empty MLM slots), so forward and backward on it, packed ÷ alone, is 1 + the empty slots' share.
    x, y = packed_batch
    full = np.flatnonzero((x["input_mask"].sum(1) == x["input_mask"].shape[1]) & (y["next_sentence_weights"].sum(1) == 1))
    if len(full):
        r = full[:1]
        p = int(y["masked_lm_weights"][r].sum())
        alone = ({k: x[k][r] for k in ("input_word_ids", "input_mask", "input_type_ids")} |
                 {"masked_lm_positions": x["masked_lm_positions"][r, :p]},
                 {"masked_lm_ids": y["masked_lm_ids"][r, :p], "masked_lm_weights": y["masked_lm_weights"][r, :p],
                  "next_sentence_labels": y["next_sentence_labels"][r, 0]})
        result["check_one_full_row"] = {
            "mlm_slots": int(x["masked_lm_positions"].shape[1]), "predictions": p,
            "packed_over_alone": round(gradient_flops(packed_model, {k: v[r] for k, v in x.items()},
                                                      {k: v[r] for k, v in y.items()})
                                       / gradient_flops(model, *alone), 4)}
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def save_one_by_one(path: str, packed_batches: list[dict], predictions: int) -> None:
    """The sequences of `packed_batches` (unpacked, in google-research's format) and how many steps they fill,
    for one_by_one."""
    import numpy as np
    from bert_keras.pretraining.packed_records import unpack_rows
    sequences = [unpack_rows(b, predictions) for b in packed_batches]
    np.savez(path, steps=len(packed_batches), **{k: np.concatenate([s[k] for s in sequences]) for k in sequences[0]})


def flops_of(compiled) -> float:
    """XLA's cost analysis 'flops' of a compiled jax function."""
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis["flops"])


def jax_state(model) -> tuple:
    """Keras' JAX train-step state of `model`: (trainable, non-trainable, optimizer, metrics variables)."""
    return model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                optimizer_variables=True, metrics_variables=True)


def cost(model, batch, tokens_per_step: float) -> dict:
    """XLA's cost analysis of Keras' JAX train step on `batch` (flops), per real token of a step."""
    import jax
    x, y = batch
    flops = flops_of(jax.jit(model.train_step).lower(jax_state(model), (x, y, None)).compile())
    return {"xla_flops_per_step": flops, "xla_flops_per_real_token": round(flops / tokens_per_step, 1)}


def gradient_flops(model, x, y) -> float:
    """XLA's FLOPs of the forward and backward of Keras' JAX train step on (x, y): the step without the optimizer
    and the metrics."""
    import jax
    trainable, non_trainable, optimizer, metrics = jax_state(model)

    def grad(trainable, non_trainable, metrics, x, y, optimizer):
        return jax.value_and_grad(model.compute_loss_and_updates, has_aux=True)(
            trainable, non_trainable, metrics, x, y, None, training=True, optimizer_variables=optimizer)
    return flops_of(jax.jit(grad).lower(trainable, non_trainable, metrics, x, y, optimizer).compile())


def model_flops_per_real_token(config, batches) -> dict:
    """The module docstring's count over `batches` ([(features)] as saved), per real token ("model"); and the
    same formula over what the batches' static shapes compute ("static_shapes": every position of every row, the
    whole rows' S x S attention, every MLM slot and every [CLS] slot), the FLOPs XLA's step does before the
    elementwise work; the ratio of the two is the shapes' overhead (padding, attention across a packed row's
    sequences, empty MLM slots)."""
    import numpy as np
    h, i, layers, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size

    def forward(t, attention, p, n):
        return (t * 2 * layers * (4 * h * h + 2 * h * i) + 4 * layers * h * attention
                + p * (2 * h * h + 2 * h * v) + n * (2 * h * h + 4 * h))

    model = static = 0.0
    tokens = 0
    for features in batches:
        mask = features["input_mask"]
        rows, seq = mask.shape
        t = int(mask.sum())
        if "packed_sequence_ids" in features:
            ids = features["packed_sequence_ids"]
            lengths = np.stack([(ids == k).sum(1) for k in (1, 2, 3)]).reshape(-1)
        else:
            lengths = mask.sum(1)
        lengths = lengths[lengths > 0].astype(np.float64)
        p = float((features["masked_lm_weights"] > 0).sum())
        model += 3 * forward(t, float((lengths ** 2).sum()), p, len(lengths))
        cls_slots = features["cls_positions"].shape[1] if "cls_positions" in features else 1
        static += 3 * forward(rows * seq, float(rows * seq * seq), features["masked_lm_weights"].size,
                              rows * cls_slots)
        tokens += t
    return {"model": round(model / tokens, 1), "static_shapes": round(static / tokens, 1)}


def run_side(backend: str, devices: int, tmp: str, sets: list[str], args, flops: bool = False) -> dict:
    """One side (or, with `flops`, the compile-only FLOPs side) in a fresh process; its results."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO)}
    env.pop("XLA_FLAGS", None)
    if backend == "jax" and args.jax_path:
        env["PYTHONPATH"] += os.pathsep + args.jax_path
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    argv = [sys.executable, __file__, "--side", "--tmp", tmp, "--sets", json.dumps(sets), "--devices", str(devices),
            "--preset", args.preset, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if flops:
        argv += ["--flops-side", "--flops-presets", *args.flops_presets]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{backend} x{devices} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    print(f"{backend} x{devices}{' FLOPs' if flops else ''}: {time.perf_counter() - start:.0f} s", flush=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def representative_rows(packed: dict, count: int, seed: int = 0):
    """`count` packed rows, drawn at random (seeded) within each number of sequences a row in the data's
    proportions, then shuffled. The rows hold 1, 2 or 3 sequences (on (b): 993, 59 and 995 rows), so a plain random
    draw of a few hundred rows is far from the mix: seed 0's 320 rows held 1.83 sequences a row, not 2.00, and
    their sequences 277 tokens on average, not 254, which put the unpacked batches at 54% real tokens instead of
    the mix's 50% and capped what packing can gain on them at 1.80x instead of 2.0x. (The packer orders rows by
    their first sequence, so the first rows are no sample either.)"""
    import numpy as np
    rng = np.random.default_rng(seed)
    per_row = (packed["next_sentence_weights"] > 0).sum(1)
    groups = [np.flatnonzero(per_row == k) for k in np.unique(per_row)]
    shares = np.array([len(g) for g in groups], np.float64) * count / len(per_row)
    takes = np.floor(shares).astype(int)
    takes[np.argsort(takes - shares)[:count - takes.sum()]] += 1           # largest remainders first
    chosen = np.concatenate([rng.permutation(g)[:t] for g, t in zip(groups, takes)])
    return rng.permutation(chosen)


def save_batches(path: str, features: dict, rows_per_step: int, count: int) -> list[dict]:
    """The first `count` batches of `rows_per_step` rows (the data repeated if short) -> npz; returns them."""
    import numpy as np
    n = len(features["input_ids"])
    batches, arrays = [], {}
    for b in range(count):
        take = np.arange(b * rows_per_step, (b + 1) * rows_per_step) % n
        batch = {k: v[take] for k, v in features.items()}
        batches.append(batch)
        arrays.update({f"b{b}_{k}": v for k, v in batch.items()})
    np.savez(path, **arrays)
    return batches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="bert_tiny")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--jax-path", help="a folder holding jax, added to the JAX sides' PYTHONPATH (when the "
                        "environment has no [jax] extra: pip install --target FOLDER jax==0.10.2 jaxlib==0.10.2)")
    parser.add_argument("--data", nargs="+", default=list(DATA), choices=DATA, help="the data sets (all)")
    parser.add_argument("--sides", nargs="*", default=[f"{b}_x{d}" for b, d in SIDES],
                        choices=[f"{b}_x{d}" for b, d in SIDES], help="the steps measured (all; none: --sides "
                        "with no name)")
    parser.add_argument("--flops-presets", nargs="*", default=["bert_base", "bert_large"],
                        help="presets whose JAX train step is compiled (not run) on (b)'s packed and unpacked "
                             "batches for XLA's FLOPs per real token; the first also checks the count against "
                             "XLA's forward (default bert_base bert_large; none: the option with no name)")
    parser.add_argument("--packed-rows", type=int, help="packed rows a step (default 16 at 128, 8 at 512; unpacked "
                        "steps hold the same sequences)")
    parser.add_argument("--one-by-one-steps", type=int, help="on (b), the first K timed packed steps' "
                        "sequences are also compiled one at a time, each at its own length, for XLA's count of the "
                        "model's own work (1 device; about 2 s a sequence at bert_tiny; default 2, or --steps if "
                        "fewer; 0: not done)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "packing.json"))
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    parser.add_argument("--sets", help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--flops-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_by_one_steps is None:
        args.one_by_one_steps = min(2, args.steps)
    if not 0 <= args.one_by_one_steps <= args.steps:
        parser.error(f"--one-by-one-steps {args.one_by_one_steps}: give 0 to {args.steps} (--steps), the timed "
                     "steps whose sequences are compiled one at a time")
    if args.flops_side:
        print(json.dumps(flops_side(args)))
        return
    if args.side:
        print(json.dumps(side(args)))
        return
    if args.flops_presets and "wikipedia_like_512" not in args.data:
        raise SystemExit("--flops-presets measures on wikipedia_like_512: add it to --data, or pass --flops-presets "
                         "with no name")
    if not SQUAD.exists() and any(name.startswith("short_documents") for name in args.data):
        raise SystemExit(f"{SQUAD} is absent: set BERT_KERAS_SHARED_DATA to the shared data folder")
    from bert_keras import PRESETS
    from bert_keras.loading import bundled_minilm_folder
    from savedmodels.precision import cpu_flags
    config = PRESETS[args.preset]
    vocab = os.path.join(bundled_minilm_folder(), "vocab.txt")
    report = {"date": time.strftime("%Y-%m-%d"), "preset": args.preset, "steps": args.steps, "warmup": args.warmup,
              "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "sse4"))),
              "cores": os.cpu_count(), "load_average_at_start": os.getloadavg(),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                       text=True).stdout.strip() or "unknown: not run from a git checkout",
              "started_utc": time.strftime("%H:%M", time.gmtime()), "data": {}, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        made = {}
        for seq in (128, 512):
            if f"short_documents_{seq}" in args.data:
                made[f"short_documents_{seq}"] = short_document_data(tmp, vocab, seq)
        if "wikipedia_like_512" in args.data:
            made["wikipedia_like_512"] = wikipedia_like_data(config.vocab_size)
        sets = []
        import numpy as np
        from bert_keras.pretraining.packed_records import unpack_rows
        for name, (unpacked, packed, info) in made.items():
            seq = unpacked["input_ids"].shape[1]
            info.update(describe(unpacked, packed), max_seq_length=seq)
            rows = args.packed_rows or PACKED_ROWS[seq]
            count = args.warmup + args.steps
            # The timed rows: count x rows packed rows (unpacked: the same sequences, in order).
            chosen = representative_rows(packed, count * rows)
            packed = {k: v[chosen] for k, v in packed.items()}
            unpacked = unpack_rows(packed, PREDICTIONS[seq])          # (80 slots at 512, as unpacked records)
            info["sequences_per_step"] = round(len(unpacked["input_ids"]) / count, 2)
            info["mlm_slots_packed"] = packed["masked_lm_weights"].shape[1]
            unpacked_rows = max(8, int(round(info["sequences_per_step"] / 8)) * 8)
            for kind, (features, r) in {"packed": (packed, rows), "unpacked": (unpacked, unpacked_rows)}.items():
                batches = save_batches(os.path.join(tmp, f"{name}_{kind}.npz"), features, r, count)
                if kind == "packed" and name == "wikipedia_like_512" and args.one_by_one_steps:
                    save_one_by_one(os.path.join(tmp, f"{name}_one_by_one.npz"),
                                    batches[args.warmup:args.warmup + args.one_by_one_steps], PREDICTIONS[seq])
                for preset in [args.preset] + (args.flops_presets if name == "wikipedia_like_512" else []):
                    info.setdefault("model_flops_per_real_token", {}).setdefault(preset, {})[kind] = \
                        model_flops_per_real_token(PRESETS[preset], batches[args.warmup:])
                info[f"rows_per_step_{kind}"] = r
                info[f"real_token_share_timed_{kind}"] = round(float(np.mean(
                    [b["input_mask"].mean() for b in batches[args.warmup:]])), 4)
            # What packed over unpacked real tokens/s reaches on these batches when a row costs the same packed or not.
            info["real_token_share_ratio_timed"] = round(info["real_token_share_timed_packed"]
                                                         / info["real_token_share_timed_unpacked"], 3)
            sets.append(name)
            report["data"][name] = info
            print(name, json.dumps(info), flush=True)
        for backend, devices in (side for side in SIDES if f"{side[0]}_x{side[1]}" in args.sides):
            report["runs"][f"{backend}_x{devices}"] = run_side(backend, devices, tmp, sets, args)
        if args.flops_presets:
            report["flops"] = run_side("jax", 1, tmp, ["wikipedia_like_512"], args, flops=True)
    report["finished_utc"] = time.strftime("%H:%M", time.gmtime())
    report["load_average_at_end"] = os.getloadavg()
    for name in report["data"]:
        for run, results in report["runs"].items():
            p, u = results[f"{name}_packed"], results[f"{name}_unpacked"]
            report["data"][name].setdefault("real_tokens_per_second_packed_over_unpacked", {})[run] = \
                round(p["real_tokens_per_second"] / u["real_tokens_per_second"], 3)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report["data"], indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
