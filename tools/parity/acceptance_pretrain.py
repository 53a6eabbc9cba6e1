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


def make_records(work: str, wikitext: str, vocab: str) -> tuple[list[str], list[str]]:
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    pre = BertPreprocessor(vocab)
    out = {}
    for split, dupe in (("valid", 5), ("test", 1)):
        text = os.path.join(work, f"{split}.txt")
        subprocess.run([sys.executable, str(REPO / "tools" / "wikitext_to_sentences.py"),
                        os.path.join(wikitext, f"{split}.txt"), "--out", text], check=True)
        result = create_pretraining_data([text], pre, os.path.join(work, split), 1,
                                         MaskingConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                                       dupe_factor=dupe), seed=1)
        out[split] = result["files"]
        print(f"{split}: {result['instances']:,} instances", flush=True)
    return out["valid"], out["test"]


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


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wikitext", default=str(REPO.parent / "shared" / "data" / "wikitext-2"))
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--held-out-batches", type=int, default=16, help="held-out batches of 64 scored (default 16)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "acceptance_pretrain.json"))
    args = p.parse_args(argv)

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
    train_files, held_files = make_records(work, args.wikitext, vocab)

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
