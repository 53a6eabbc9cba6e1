#!/usr/bin/env python
"""The BERT paper's Table 7 (feature-based NER, section 5.3) on this machine, with the real all-MiniLM-L6-v2.

Frozen contextual word features (first piece of each word, bert_keras.features) from six choices of layers feed
a two-layer BiLSTM tagger; its entity F1 (bert_keras.metrics.tagging, seqeval's rules) is set beside fine-tuning
the same MiniLM on the same sentences (bert_keras.finetune with docs/accuracy.md's CoNLL recipe, but 10 epochs at
lr 1e-4, chosen on valid: 2 epochs at 5e-5 stop far short of the plateau on 2,000 sentences).
MiniLM has 6 layers, so "last four" = layers 3-6 and "all" = the embeddings + 6 layers (the paper: 12).

Split (the CoNLL-2003 test file, eng.testb, is not in ../shared/data): train = train.txt's first --train
sentences; valid = valid.txt's (eng.testa) first 1,000 sentences; test = the other 2,250 sentences of valid.txt.
Nothing is tuned on test: each run trains a fixed number of epochs and is scored once; the fine-tuning row's
epochs were chosen on valid alone (--finetune-curve scores valid after every epoch and never scores test).
Each row: --restarts runs (seeds 0, 1, ...), mean and standard deviation.

Paper's recipe vs this one, said plainly: BERT-Base (12 x 768) vs MiniLM (6 x 384, trained for sentence
embeddings, uncased); a 768-unit BiLSTM vs --units (default 64) per direction, --epochs (default 4) with no epoch selection; 5 restarts vs --restarts; the full
14,041 training sentences vs --train (default 2,000, as docs/probes.md's probes); CoNLL's test set vs the second part of eng.testa.

Usage:
  nice -n 5 .venv/bin/python tools/table7.py                       # writes benchmarks/results/table7.json
  .venv/bin/python tools/table7.py --train 300 --restarts 1 --epochs 2 --skip-finetune    # a quick look
  nice -n 19 .venv/bin/python tools/table7.py --skip-features --restarts 1 --finetune-curve --finetune-epochs 12 \
      --out benchmarks/results/table7_finetune_curve.json     # valid F1 after each fine-tuning epoch (seed 0)
  nice -n 19 .venv/bin/python tools/table7.py --skip-features \
      --out benchmarks/results/table7_finetune.json           # the fine-tuning row alone, 3 seeds
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

import numpy as np

ROWS = ("embeddings", "second_to_last", "last", "weighted_sum_last_four", "concat_last_four", "weighted_sum_all")
PAPER = {"embeddings": (91.0, None), "second_to_last": (95.6, None), "last": (94.9, None),
         "weighted_sum_last_four": (95.9, None), "concat_last_four": (96.1, None), "weighted_sum_all": (95.5, None),
         "finetune": (96.4, 92.4)}        # BERT-Base dev F1 (Table 7); fine-tuning also its test F1 (Table 3)
VALID_SENTENCES = 1000


def split(data: str, train_sentences: int):
    from bert_keras.data.conll import read_conll2003
    train = read_conll2003(os.path.join(data, "conll2003", "train.txt"))[:train_sentences]
    held = read_conll2003(os.path.join(data, "conll2003", "valid.txt"))
    return train, held[:VALID_SENTENCES], held[VALID_SENTENCES:]


def batches(features: list, tags: list, size: int, rng=None):
    """Sentences -> batches of `size`: features [b, W, ...] float32 zero-padded to the batch's longest sentence
    rounded up to a multiple of 16 (not the set's longest: CoNLL sentences are 14 words on average, the longest
    over 100) and tag ids [b, W] (-1 at padding). Shuffled when `rng` is given."""
    order = rng.permutation(len(tags)) if rng is not None else np.arange(len(tags))
    for start in range(0, len(order), size):
        rows = order[start:start + size]
        longest = -(-max(len(tags[i]) for i in rows) // 16) * 16        # a few shapes: traced once each
        x = np.zeros((len(rows), longest) + features[rows[0]].shape[1:], np.float32)
        y = np.full((len(rows), longest), -1, np.int32)
        for j, i in enumerate(rows):
            x[j, :len(tags[i])] = features[i]
            y[j, :len(tags[i])] = tags[i]
        yield x, y


def bilstm_tagger(feature_shape, num_tags: int, units: int, mix: bool):
    """Features [B, W, D] (or [B, W, n, H] stacks, mixed by a learned ScalarMix) -> tag logits [B, W, num_tags]:
    two BiLSTM layers (the paper's feature-based tagger), a dense output."""
    import keras

    from bert_keras.features import ScalarMix
    inputs = keras.Input((None,) + feature_shape)
    x = keras.layers.Masking(0.0)(ScalarMix()(inputs) if mix else inputs)        # padding words are all-zero
    for _ in range(2):
        x = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True))(x)
    return keras.Model(inputs, keras.layers.Dense(num_tags)(x))


def masked_loss(y_true, y_pred):
    import keras
    from keras import ops
    mask = ops.cast(y_true >= 0, "float32")
    loss = keras.losses.sparse_categorical_crossentropy(ops.maximum(y_true, 0), y_pred, from_logits=True)
    return ops.sum(loss * mask) / ops.maximum(ops.sum(mask), 1.0)


def entity_f1(model, features, sentences, labels) -> float:
    from bert_keras.metrics.tagging import f1_score
    tags = [[0] * len(s.tags) for s in sentences]
    predicted = [row for x, _ in batches(features, tags, 64) for row in model.predict_on_batch(x).argmax(-1)]
    return f1_score([list(s.tags) for s in sentences],
                    [[labels[t] for t in row[:len(s.tags)]] for row, s in zip(predicted, sentences)])


def feature_run(choice, states, sets, labels, seed, args) -> dict:
    """One restart of one feature row: --epochs over sets["train"], then entity F1 on valid and test (no epoch
    selection: scoring every epoch would cost about as much as training)."""
    import keras

    from bert_keras.features import combine_hidden_states, hidden_state_indices
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    picked = hidden_state_indices(choice, states["num_layers"])
    features = {name: [combine_hidden_states(s[:, picked], choice) for s in states[name]] for name in sets}
    train_tags = [[labels.index(t) for t in s.tags] for s in sets["train"]]
    model = bilstm_tagger(features["train"][0].shape[1:], len(labels), args.units, choice.startswith("weighted"))
    model.compile(keras.optimizers.Adam(args.learning_rate), masked_loss)
    for _ in range(args.epochs):
        for x, y in batches(features["train"], train_tags, 32, rng):
            model.train_on_batch(x, y)
    best = {f"{name}_f1": entity_f1(model, features[name], sets[name], labels) for name in ("valid", "test")}
    print(f"  {choice} seed {seed}: {best}", flush=True)
    return best


def write_conll(path: str, sentences) -> str:
    """Sentences -> a CoNLL-2003 file at `path` (word, POS, chunk, tag per line; a blank line after each)."""
    with open(path, "w", encoding="utf-8") as f:
        for s in sentences:
            f.write("".join(f"{w} {p} {c} {t}\n" for w, p, c, t in zip(s.tokens, s.pos_tags, s.chunk_tags, s.tags))
                    + "\n")
    return path


def finetune_run(sets, labels, seed, args, workdir) -> dict:
    """Fine-tuning MiniLM on the same train sentences (docs/accuracy.md's CoNLL recipe: linear decay after 10%
    warm-up, max_seq_length 128; --finetune-epochs passes at --finetune-learning-rate, batches of
    --finetune-batch-size), scored once on valid and test. With --finetune-curve, valid is
    scored after every epoch instead (finetune's evaluation set) and test is not scored at all: the curve chooses
    --finetune-epochs without seeing test."""
    import keras

    from bert_keras.finetune import FinetuneConfig, finetune
    from bert_keras.loading import bundled_minilm_folder
    from bert_keras.metrics.tagging import f1_score
    train_file = write_conll(os.path.join(workdir, "train.txt"), sets["train"])
    # Without the curve, finetune's own evaluation is a look at 32 training sentences (no held-out data).
    evaluate = write_conll(os.path.join(workdir, "valid.txt"), sets["valid"]) if args.finetune_curve else train_file
    out = os.path.join(workdir, f"finetune-{seed}")
    started = time.time()
    result = finetune(FinetuneConfig(task="conll2003", model=bundled_minilm_folder(), out=out, train=train_file,
                                     eval=evaluate, max_eval_examples=None if args.finetune_curve else 32,
                                     epochs=args.finetune_epochs, batch_size=args.finetune_batch_size,
                                     learning_rate=args.finetune_learning_rate, max_seq_length=128, seed=seed,
                                     schedule="linear", progress=False))
    model = keras.models.load_model(os.path.join(out, "model.keras"))
    scores = {}
    for name in ("valid",) if args.finetune_curve else ("valid", "test"):
        predicted = model.tag_words([list(s.tokens) for s in sets[name]])
        scores[f"{name}_f1"] = f1_score([list(s.tags) for s in sets[name]], predicted)
    scores |= {"epochs": args.finetune_epochs, "learning_rate": args.finetune_learning_rate,
               "batch_size": args.finetune_batch_size, "steps": result["steps"],
               "fit_seconds": result["timing"]["fit_seconds"], "seconds": round(time.time() - started, 1),
               "train_loss": [round(float(x), 4) for x in result["loss"]]}
    if args.finetune_curve:
        scores["valid_f1_per_epoch"] = [round(h["f1"], 4) for h in result["history"]]
    return scores


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.environ.get("BERT_KERAS_SHARED_DATA",
                                                    os.path.join(os.path.dirname(__file__), "../../shared/data")))
    p.add_argument("--train", type=int, default=2000, help="training sentences (default 2,000)")
    p.add_argument("--restarts", type=int, default=3)
    p.add_argument("--epochs", type=int, default=4, help="BiLSTM epochs (scored after the last)")
    p.add_argument("--units", type=int, default=64, help="LSTM units per direction (the paper: 768)")
    p.add_argument("--learning-rate", type=float, default=2e-3, help="the BiLSTM's Adam learning rate")
    p.add_argument("--skip-finetune", action="store_true")
    p.add_argument("--skip-features", action="store_true",
                   help="only the fine-tuning row (no feature extraction, no BiLSTM rows)")
    p.add_argument("--finetune-epochs", type=float, default=10,
                   help="fine-tuning passes (the schedule's length; 10: chosen on valid, docs/inside-bert.md)")
    p.add_argument("--finetune-learning-rate", type=float, default=1e-4,
                   help="fine-tuning's peak learning rate (1e-4: chosen on valid over 5e-5)")
    p.add_argument("--finetune-batch-size", type=int, default=32)
    p.add_argument("--finetune-curve", action="store_true",
                   help="score valid after every fine-tuning epoch, and never test: to choose --finetune-epochs")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../benchmarks/results/table7.json"))
    args = p.parse_args(argv)
    if args.skip_features and args.skip_finetune:
        print("--skip-features with --skip-finetune leaves no row to run", file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(args.data, "conll2003")):
        print(f"no conll2003/ under {args.data}: pass --data (../shared/data) or set BERT_KERAS_SHARED_DATA",
              file=sys.stderr)
        return 2
    import bert_keras  # noqa: F401
    from bert_keras.data.conll import CONLL2003_LABELS
    from bert_keras.features import word_features
    from bert_keras.loading import bundled_minilm_folder, load_backbone
    labels = list(CONLL2003_LABELS)
    train, valid, test = split(args.data, args.train)
    sets = {"train": train, "valid": valid, "test": test}
    started = time.time()
    extraction = None
    if not args.skip_features:
        encoder, preprocessor = load_backbone(bundled_minilm_folder(), max_seq_length=512)   # no sentence is cut
        started = time.time()
        states = {"num_layers": encoder.config.num_hidden_layers}
        for name, sentences in sets.items():      # every hidden state once ([words, L + 1, H]); rows are cut from it
            got = word_features(encoder, preprocessor, [list(s.tokens) for s in sentences],
                                layers="weighted_sum_all")
            if got.dropped.sum():
                raise RuntimeError(f"{got.dropped.sum()} words of {name} lie past 512 pieces")
            states[name] = got.per_text()
        extraction = time.time() - started
        print(f"features of {sum(len(v) for k, v in states.items() if k != 'num_layers')} sentences in "
              f"{extraction:.0f} s", flush=True)
    results = {}

    def report():
        table = {row: {f"{part}_{stat}": float(fn([r[f"{part}_f1"] for r in runs])) * 100
                       for part in ("valid", "test") if f"{part}_f1" in runs[0]     # a curve never scores test
                       for stat, fn in (("mean", np.mean), ("std", np.std))}
                 | {"paper_dev": PAPER[row][0], "paper_test": PAPER[row][1], "runs": len(runs)}
                 for row, runs in results.items()}
        from bert_keras.atomic import write_json
        write_json(args.out, {"date": datetime.date.today().isoformat(), "settings": vars(args),
                              "split": {"train": len(train), "valid": len(valid), "test": len(test)},
                              "feature_extraction_seconds": extraction and round(extraction, 1),
                              "seconds": round(time.time() - started, 1), "table": table, "runs": results})
        return table

    # Restart by restart, every row in each: an interrupted run still has whole tables of fewer restarts.
    with tempfile.TemporaryDirectory() as workdir:
        for seed in range(args.restarts):
            for choice in () if args.skip_features else ROWS:
                results.setdefault(choice, []).append(feature_run(choice, states, sets, labels, seed, args))
                report()
            if not args.skip_finetune:
                results.setdefault("finetune", []).append(finetune_run(sets, labels, seed, args, workdir))
                print(f"  finetune seed {seed}: {results['finetune'][-1]}", flush=True)
                report()
    table = report()
    for row, r in table.items():
        test = f"test {r['test_mean']:.1f} ± {r['test_std']:.1f}" if "test_mean" in r else "test not scored"
        print(f"{row:<24} valid {r['valid_mean']:.1f} ± {r['valid_std']:.1f}   {test}   paper {r['paper_dev']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
