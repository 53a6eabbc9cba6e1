#!/usr/bin/env python
"""Writes the labelled sample `make demo` fine-tunes on: bert_keras/data/samples/sst2_{train,dev}.tsv.

Source: GLUE SST-2 (Stanford Sentiment Treebank, Socher et al. 2013), the GLUE TSV layout (`sentence\\tlabel`).
train: 500 positive + 500 negative training phrases of at least 8 words (the shortest SST-2 phrases are fragments
       such as "good" that teach little in a one-minute run), picked with random.Random(0), shuffled with Random(1).
dev:   the first 200 sentences of dev.tsv (104 positive), unchanged.

    python tools/make_demo_sample.py --sst2 ../shared/data/SST-2
"""

import argparse
import os
import random

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bert_keras", "data", "samples")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sst2", required=True, help="folder with GLUE SST-2 train.tsv and dev.tsv")
    args = p.parse_args()
    with open(os.path.join(args.sst2, "train.tsv"), encoding="utf-8") as f:
        rows = [r for r in f.read().splitlines()[1:] if len(r.split("\t")[0].split()) >= 8]
    random.Random(0).shuffle(rows)
    train = [r for r in rows if r.endswith("\t1")][:500] + [r for r in rows if r.endswith("\t0")][:500]
    random.Random(1).shuffle(train)
    with open(os.path.join(args.sst2, "dev.tsv"), encoding="utf-8") as f:
        dev = f.read().splitlines()[:201]
    os.makedirs(OUT, exist_ok=True)
    for name, lines in (("sst2_train.tsv", ["sentence\tlabel", *train]), ("sst2_dev.tsv", dev)):
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"wrote {os.path.join(OUT, name)} ({len(lines) - 1} rows)")


if __name__ == "__main__":
    main()
