#!/usr/bin/env python
"""Pretraining acceptance: bert_tiny from scratch, ours against keras-hub's BertMaskedLM, same data and budget.

Data: WikiText-2 (../shared/data/wikitext-2) in google-research's format (tools/wikitext_to_sentences.py):
valid.txt for training, test.txt held out. Both go through `bert_keras.pretraining.create_pretraining_data`
(max_seq_length 128, 20 predictions, dupe_factor 5 for training, 1 held out), so the two models see the same
records in the same order (records_dataset, seed 0) and are scored on the same held-out masks.
Both: bert_tiny (2 layers, hidden 128, 2 heads, intermediate 512, dropout 0.1, uncased BERT vocab), masked LM
only (keras-hub's BertMaskedLM has no NSP head; ours runs with nsp=False), AdamW (0.01 decay, not on LayerNorm /
bias for ours; keras-hub's model gets the same optimizer object type and schedule), warm-up then linear decay,
global clip 1.0, batch 32. Held-out MLM loss and accuracy every --eval-every steps; the curves go to a PNG.

    python tools/parity/acceptance_pretrain.py [--steps 1500] [--eval-every 250]
Writes benchmarks/results/acceptance_pretrain.json and .png.

--packed-vs-unpacked (issue 49, "no cross-contamination in training"): OUR bert_tiny only, trained on (a) the
unpacked records and (b) the same instances written with `pack=True` (create_pretraining_data's `--pack`: the same
plan and seed give the same instances and masks, only grouped into rows of up to 3), once per --seeds value (the
seed sets the initial weights, dropout and the records' reading order), all scored on the same unpacked held-out
records (WikiText-2 test, articles as documents, as above). MLM + NSP (google-research's loss, pretraining_loss;
packed: NSP per sequence from its own [CLS], averaged over sequences), so both the block-diagonal attention and
the per-sequence pooling are in the trained path; held-out MLM loss / accuracy and NSP accuracy every
--eval-every steps. The training text is WikiText-2 valid with each paragraph a document (--documents
paragraphs, the default in this mode): google-research's recipe unchanged, but its articles are long, so at 128
rows would hold only ~1.05 sequences and packing would hardly change a batch; paragraphs end chunks early and
give short instances, so rows really hold several (the sequences per row is reported).
Same number of sequences: every run takes the same number of steps (so the same warm-up / decay schedule), and the
packed runs take round(32 / sequences-per-row) rows a step, so a step holds 32 sequences on average; equal steps
of 32 rows would give the packed runs ~spr x more data and a different loss scale per step, not the comparison
asked for. The sequences actually trained on are counted and reported per run.

    python tools/parity/acceptance_pretrain.py --packed-vs-unpacked --seeds 0 1 --steps 400 --eval-every 50
(on an idle 2-core host a few minutes a run; under the load of 2026-11-29 ~0.1 core each, so a run of 400 steps
took 30-40 minutes, the packed ones longer: their rows, written before packed_prediction_slots, carried 3 x 20
MLM slots, mostly empty, so 1,560 slots a step went through the vocabulary-wide output against 640 unpacked; rows
now carry 21 at 128.)
Writes benchmarks/results/packed_convergence.json and docs/img/packed_convergence.png (--merge a.json b.json
combines runs made in separate processes, e.g. one per seed, into those two files).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SEQ, PRED, BATCH = 128, 20, 32


def make_records(work: str, wikitext: str, vocab: str, documents: str = "articles",
                 pack: bool = False) -> tuple[list[str], list[str], dict]:
    """WikiText-2 -> (train files, held-out files, the training data's counts). documents: "articles" (a
    blank line between articles, tools/wikitext_to_sentences.py) or "paragraphs" (one between paragraphs, the
    training split only); pack: also write the training instances packed (the counts then say both)."""
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    pre = BertPreprocessor(vocab)
    out, counts = {}, {}
    for split, dupe in (("valid", 5), ("test", 1)):
        text = os.path.join(work, f"{split}.txt")
        subprocess.run([sys.executable, str(REPO / "tools" / "wikitext_to_sentences.py"),
                        os.path.join(wikitext, f"{split}.txt"), "--out", text], check=True)
        if split == "valid" and documents == "paragraphs":
            paragraphs_as_documents(os.path.join(wikitext, f"{split}.txt"), text)
        config = MaskingConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=dupe)
        result = create_pretraining_data([text], pre, os.path.join(work, split), 1, config, seed=1)
        out[split] = result["files"]
        print(f"{split}: {result['instances']:,} instances", flush=True)
        if split == "valid":
            counts = {"documents": result["documents"], "instances": result["instances"]}
            if pack:
                packed = create_pretraining_data([text], pre, os.path.join(work, "valid_packed"), 1, config, seed=1,
                                                 pack=True)
                assert packed["instances"] == result["instances"], (packed, result)
                out["packed"], counts["rows"] = packed["files"], packed["records"]
                print(f"packed: {packed['records']:,} rows", flush=True)
    train = (out["valid"], out["packed"]) if pack else out["valid"]
    return train, out["test"], counts


def paragraphs_as_documents(wikitext: str, out: str) -> None:
    """WikiText -> google-research's text format with each paragraph a document (a blank line between
    paragraphs; headings dropped, sentences split as tools/wikitext_to_sentences.py does)."""
    import re
    end = re.compile(r"(?<= [.?!]) ")
    with open(wikitext, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w:
        for line in f:
            line = line.strip()
            if line and not line.startswith("="):
                w.write("\n".join(s.strip() for s in end.split(line) if s.strip()) + "\n\n")


def held_out_scores(predict, data) -> dict:
    """Weighted MLM cross-entropy and accuracy over every held-out prediction."""
    import numpy as np
    total, loss, hits = 0.0, 0.0, 0.0
    for x, y in data:
        logits = np.asarray(predict(x), "float64")
        logits -= logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        ids, w = y["masked_lm_ids"].numpy(), y["masked_lm_weights"].numpy()
        nll = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
        loss += float((nll * w).sum())
        hits += float(((logits.argmax(-1) == ids) * w).sum())
        total += float(w.sum())
    return {"mlm_loss": loss / total, "mlm_accuracy": hits / total}


def train(name, model, to_inputs, to_logits, train_data, held, steps, eval_every):
    """Our optimizer and google-research's weighted MLM loss on both models, in one plain loop."""
    import tensorflow as tf

    from bert_keras.tasks.pretrainer import pretraining_loss
    from bert_keras.training import create_optimizer
    optimizer = create_optimizer(1e-3, steps, warmup_steps=steps // 10)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = to_logits(model(to_inputs(x), training=True))
            loss = pretraining_loss(logits, y["masked_lm_ids"], y["masked_lm_weights"])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    predict = tf.function(lambda x: to_logits(model(to_inputs(x), training=False)))
    curve, started, iterator = [], time.perf_counter(), iter(train_data)
    for i in range(1, steps + 1):
        x, y = next(iterator)
        step(x, y)
        if i % eval_every == 0 or i == steps:
            scores = held_out_scores(lambda x: predict(x), held)
            curve.append({"step": i, **scores, "seconds": time.perf_counter() - started})
            print(f"{name:>9} step {i:>5}: held-out MLM loss {scores['mlm_loss']:.3f}, "
                  f"accuracy {scores['mlm_accuracy']:.4f}", flush=True)
    return curve


def packed_vs_unpacked(args) -> None:
    """Our bert_tiny, MLM + NSP, on the unpacked and the packed records of the same instances, per seed."""
    import keras
    import numpy as np
    import tensorflow as tf

    from bert_keras import BertEncoder, preset_config
    from bert_keras.atomic import write_json
    from bert_keras.loading import bundled_minilm_folder
    from bert_keras.pretraining.dataset import records_dataset
    from bert_keras.tasks.pretrainer import BertPretrainer, pretraining_loss
    from bert_keras.training import create_optimizer

    vocab = os.path.join(bundled_minilm_folder(), "vocab.txt")
    work = tempfile.mkdtemp(prefix="packed_convergence_")
    documents = args.documents or "paragraphs"
    (unpacked_files, packed_files), held_files, counts = make_records(work, args.wikitext, vocab, documents, pack=True)
    per_row = counts["instances"] / counts["rows"]
    rows = max(1, round(BATCH / per_row))
    print(f"{per_row:.3f} sequences a row: packed runs take {rows} rows a step "
          f"({rows * per_row:.1f} sequences on average; unpacked {BATCH})", flush=True)
    held = list(records_dataset(held_files, 64, SEQ, PRED, training=False).take(args.held_out_batches))

    def scores(model):
        total, loss, hits, nsp_hits, pairs = 0.0, 0.0, 0.0, 0.0, 0.0
        for x, y in held:
            out = predict(model, x)
            logits = np.asarray(out["mlm_logits"], "float64")
            logits -= logits.max(-1, keepdims=True)
            log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
            ids, w = y["masked_lm_ids"].numpy(), y["masked_lm_weights"].numpy()
            loss -= float((np.take_along_axis(log_probs, ids[..., None], -1)[..., 0] * w).sum())
            hits += float(((logits.argmax(-1) == ids) * w).sum())
            total += float(w.sum())
            nsp_hits += float((np.asarray(out["nsp_logits"]).argmax(-1) == y["next_sentence_labels"].numpy()).sum())
            pairs += len(ids)
        return {"mlm_loss": loss / total, "mlm_accuracy": hits / total, "nsp_accuracy": nsp_hits / pairs}

    @tf.function(reduce_retracing=True)
    def predict(model, x):
        return model(x, training=False)

    results = {}

    def report(results, finished):
        return _packed_report(args, rows, documents, counts, per_row, results, finished)

    for seed in args.seeds:
        for kind, files, batch in (("unpacked", unpacked_files, BATCH), ("packed", packed_files, rows)):
            if kind not in args.kinds:
                continue
            name = f"{kind}/seed{seed}"
            keras.utils.set_random_seed(seed)
            model = BertPretrainer(BertEncoder(preset_config("bert_tiny")))
            optimizer = create_optimizer(1e-3, args.steps, warmup_steps=args.steps // 10)

            @tf.function
            def step(x, y):
                with tf.GradientTape() as tape:
                    out = model(x, training=True)
                    loss = pretraining_loss(out["mlm_logits"], y["masked_lm_ids"], y["masked_lm_weights"],
                                            out["nsp_logits"], y["next_sentence_labels"],
                                            y.get("next_sentence_weights"))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            data = iter(records_dataset(files, batch, SEQ, PRED, seed=seed, packed=kind == "packed"))
            curve, sequences, started = [], 0, time.perf_counter()
            for i in range(1, args.steps + 1):
                x, y = next(data)
                step(x, y)
                sequences += (int(tf.reduce_sum(y["next_sentence_weights"])) if kind == "packed"
                              else int(x["input_word_ids"].shape[0]))
                if i % args.eval_every == 0 or i == args.steps:
                    point = {"step": i, "sequences": sequences, **scores(model),
                             "seconds": round(time.perf_counter() - started, 1)}
                    curve.append(point)
                    results[name] = curve
                    write_json(args.out, report(results, finished=False))   # kept if stopped
                    print(f"{name:>15} step {i:>5} ({sequences:,} sequences): held-out MLM loss "
                          f"{point['mlm_loss']:.4f}, accuracy {point['mlm_accuracy']:.4f}, NSP accuracy "
                          f"{point['nsp_accuracy']:.4f} ({point['seconds']:.0f} s)", flush=True)
    write_json(args.out, report(results, finished=True))
    print(f"wrote {args.out}")
    plot_packed(report(results, finished=True), args.png)


def _packed_report(args, rows, documents, counts, per_row, results, finished):
    """--packed-vs-unpacked's JSON: settings, data counts, the curves so far (finished: all runs done)."""
    return {"task": "packed vs unpacked pretraining (bert_tiny from scratch, MLM + NSP, WikiText-2)",
              "settings": {"steps": args.steps, "eval_every": args.eval_every, "seeds": args.seeds,
                           "unpacked_rows_per_step": BATCH, "packed_rows_per_step": rows,
                           "max_seq_length": SEQ, "max_predictions_per_seq": PRED, "learning_rate": 1e-3,
                           "warmup_steps": args.steps // 10,
                           "train": f"wikitext-2 valid, {documents} as documents (dupe_factor 5)",
                           "held_out": f"wikitext-2 test (articles), first {64 * args.held_out_batches} "
                                       "unpacked instances"},
              "data": {**counts, "sequences_per_row": round(per_row, 4)},
              "curves": results,
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "finished": finished}


def merge_runs(args) -> None:
    """Several --packed-vs-unpacked JSONs (the same data and settings but seeds) -> one JSON and PNG."""
    import json

    from bert_keras.atomic import write_json
    reports = [json.load(open(path)) for path in args.merge]
    report = dict(reports[0])
    report["curves"] = {k: v for r in reports for k, v in r["curves"].items()}
    report["settings"] = dict(report["settings"], seeds=sorted({s for r in reports for s in r["settings"]["seeds"]}))
    assert all(r["data"] == report["data"] for r in reports), [r["data"] for r in reports]
    write_json(args.out, report)
    print(f"wrote {args.out}")
    plot_packed(report, args.png)


def plot_packed(report: dict, png: str) -> None:
    """Held-out MLM loss and accuracy against sequences trained on, packed and unpacked, 800x400."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(8, 4))
    for name, curve in sorted(report["curves"].items()):
        packed = name.startswith("packed")
        for ax, key in zip(axes, ("mlm_loss", "mlm_accuracy")):
            ax.plot([c["sequences"] / 1000 for c in curve], [c[key] for c in curve],
                    color="tab:orange" if packed else "tab:blue", linestyle="--" if packed else "-",
                    marker="x" if packed else "o", markersize=3, label=name)
            ax.set_xlabel("sequences trained on (thousands)")
            ax.set_title(f"held-out MLM {key.split('_')[1]}")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"bert_tiny, WikiText-2: packed ({report['data']['sequences_per_row']:.2f} sequences a row) "
                 "vs unpacked", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(png), exist_ok=True)
    fig.savefig(png, dpi=100)
    print(f"wrote {png}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wikitext", default=str(REPO.parent / "shared" / "data" / "wikitext-2"))
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--held-out-batches", type=int, default=16, help="held-out batches of 64 scored (default 16)")
    p.add_argument("--out", help="the JSON written (default benchmarks/results/acceptance_pretrain.json, or "
                   "packed_convergence.json with --packed-vs-unpacked / --merge)")
    p.add_argument("--packed-vs-unpacked", action="store_true",
                   help="ours only, unpacked against packed records of the same instances (module docstring)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="--packed-vs-unpacked: seeds (default 0 1)")
    p.add_argument("--kinds", nargs="+", choices=("unpacked", "packed"), default=["unpacked", "packed"],
                   help="--packed-vs-unpacked: which runs (default both; e.g. one per process, then --merge)")
    p.add_argument("--documents", choices=("articles", "paragraphs"),
                   help="training text's documents (default: articles; paragraphs with --packed-vs-unpacked)")
    p.add_argument("--png", default=str(REPO / "docs" / "img" / "packed_convergence.png"),
                   help="--packed-vs-unpacked / --merge: the curves' PNG")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="combine --packed-vs-unpacked runs' JSONs, then plot")
    args = p.parse_args(argv)
    if args.packed_vs_unpacked or args.merge:
        args.out = args.out or str(REPO / "benchmarks" / "results" / "packed_convergence.json")
        return merge_runs(args) if args.merge else packed_vs_unpacked(args)
    args.out = args.out or str(REPO / "benchmarks" / "results" / "acceptance_pretrain.json")

    import keras
    import keras_hub
    import tensorflow as tf

    from bert_keras import BertEncoder, preset_config
    from bert_keras.atomic import write_json
    from bert_keras.loading import bundled_minilm_folder
    from bert_keras.pretraining.dataset import records_dataset
    from bert_keras.tasks.pretrainer import BertPretrainer

    vocab = os.path.join(bundled_minilm_folder(), "vocab.txt")
    work = tempfile.mkdtemp(prefix="acceptance_pretrain_")
    train_files, held_files, _ = make_records(work, args.wikitext, vocab)

    def data():
        return records_dataset(train_files, BATCH, SEQ, PRED, seed=0, nsp=False)
    held = list(records_dataset(held_files, 64, SEQ, PRED, training=False, nsp=False).take(args.held_out_batches))

    config = preset_config("bert_tiny")
    results = {}
    keras.utils.set_random_seed(0)
    ours = BertPretrainer(BertEncoder(config))
    results["bert_keras"] = train(
        "bert_keras", ours, lambda x: x, lambda out: out["mlm_logits"], data(), held, args.steps, args.eval_every)

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size)
    peer = keras_hub.models.BertMaskedLM(backbone)

    def peer_inputs(x):
        return {"token_ids": x["input_word_ids"], "segment_ids": x["input_type_ids"],
                "padding_mask": tf.cast(x["input_mask"], tf.bool), "mask_positions": x["masked_lm_positions"]}
    results["keras_hub"] = train(
        "keras_hub", peer, peer_inputs, lambda logits: logits, data(), held, args.steps, args.eval_every)

    report = {"task": "pretraining acceptance (bert_tiny from scratch, MLM, WikiText-2)",
              "settings": {"steps": args.steps, "batch_size": BATCH, "max_seq_length": SEQ,
                           "max_predictions_per_seq": PRED, "learning_rate": 1e-3, "warmup_steps": args.steps // 10,
                           "train": "wikitext-2 valid (dupe_factor 5)", "held_out": f"wikitext-2 test, first {64 * args.held_out_batches} instances"},
              "curves": results,
              "final_difference_ours_minus_keras_hub": {
                  k: results["bert_keras"][-1][k] - results["keras_hub"][-1][k] for k in ("mlm_loss", "mlm_accuracy")}}
    write_json(args.out, report)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, curve in results.items():
        for ax, key in zip(axes, ("mlm_loss", "mlm_accuracy")):
            ax.plot([c["step"] for c in curve], [c[key] for c in curve], marker="o", label=name)
            ax.set_xlabel("step")
            ax.set_title(f"held-out {key.replace('_', ' ')}")
    axes[0].legend()
    fig.tight_layout()
    png = os.path.splitext(args.out)[0] + ".png"
    fig.savefig(png, dpi=100)
    print(f"wrote {args.out} and {png}")


if __name__ == "__main__":
    main()
