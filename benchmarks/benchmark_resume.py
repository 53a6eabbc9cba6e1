"""Pretraining resume: time to the first new batch at batch N, ours (the reading order starts there) against the
`skip(N)` pipeline it replaced (TFRecordDataset, interleave, shuffle buffer, batch, parse, skip), in one process.

    python benchmarks/benchmark_resume.py [--resume-at 50000] [--batch-size 32] [--records 100000]
                                     [--out benchmarks/results/resume.json]

The set: `--records` random google-research-format instances (max_seq_length 128, 20 predictions) framed by
bert_keras.pretraining.records.tfrecord_frames, round-robin into 4 files (~1.1 kB a record), read in epochs, so
batch 50,000 of batch 32 lies in epoch 16. Reported for each side: seconds from building the dataset to holding
batch N (ours includes indexing the files, also given apart, and timed cold: no index cache), steady records/s
over the next batches (the input rate a training run sees), and ours/peer ratios. Both sides' batch N are checked
to have the shape a batch has; ours is checked to equal batch N of its own uninterrupted stream (read the long
way once, untimed when --check).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEQ, PRED = 128, 20


def make_records(folder: str, count: int) -> list[str]:
    import numpy as np
    from bert_keras.pretraining.records import tfrecord_frames
    rng = np.random.default_rng(0)
    length = rng.integers(20, SEQ + 1, count)
    real = np.arange(SEQ)[None, :] < length[:, None]
    features = {"input_ids": np.where(real, rng.integers(1000, 30000, (count, SEQ)), 0),
                "input_mask": real.astype(np.int64), "segment_ids": ((np.arange(SEQ)[None] > length[:, None] // 2)
                & real).astype(np.int64), "masked_lm_positions": np.sort(rng.integers(1, 20, (count, PRED)), axis=1),
                "masked_lm_ids": rng.integers(1000, 30000, (count, PRED)),
                "masked_lm_weights": np.ones((count, PRED), np.float32),
                "next_sentence_labels": rng.integers(0, 2, (count, 1))}
    paths = [os.path.join(folder, f"set-{i:05d}-of-00004.tfrecord") for i in range(4)]
    for i, path in enumerate(paths):                 # record k to file k % 4, as google-research writes them
        data, _ = tfrecord_frames({k: np.asarray(v)[i::4] for k, v in features.items()})
        with open(path, "wb") as f:
            f.write(data.tobytes())
    return paths


def skip_pipeline(files, batch_size, skip, seed=0):
    """What records_dataset did before: seeded file shuffle, interleave, 10k shuffle buffer, batch, parse, skip."""
    import tensorflow as tf
    from bert_keras.pretraining.records import feature_spec
    spec = feature_spec(SEQ, PRED)
    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=seed).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)))
    ds = ds.shuffle(10_000, seed=seed).batch(batch_size, drop_remainder=True)
    ds = ds.map(lambda r: tf.io.parse_example(r, spec), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.skip(skip).prefetch(tf.data.AUTOTUNE)


def timed(make, steady_batches: int, batch_size: int) -> dict:
    start = time.perf_counter()
    iterator = iter(make())
    first = next(iterator)
    to_first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steady_batches):
        next(iterator)
    rate = steady_batches * batch_size / (time.perf_counter() - start)
    return {"seconds_to_batch": round(to_first, 3), "steady_records_per_s": round(rate), "first": first}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resume-at", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--steady-batches", type=int, default=300)
    parser.add_argument("--check", action="store_true", help="also read ours the long way and compare batch N")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/resume.json"))
    args = parser.parse_args(argv)
    import numpy as np
    from bert_keras.atomic import write_json
    from bert_keras.pretraining.dataset import records_dataset
    from bert_keras.pretraining.reading_order import index_files

    work = tempfile.mkdtemp(prefix="benchmark_resume_")
    files = make_records(work, args.records)
    n, b = args.resume_at, args.batch_size
    start = time.perf_counter()
    index_files(files, "tfrecord")
    index_seconds = time.perf_counter() - start
    ours = timed(lambda: records_dataset(files, b, SEQ, PRED, seed=0, first_batch=n), args.steady_batches, b)
    peer = timed(lambda: skip_pipeline(files, b, n), args.steady_batches, b)
    x, _ = ours.pop("first")
    assert x["input_word_ids"].shape == (b, SEQ) and peer.pop("first")["input_ids"].shape == (b, SEQ)
    if args.check:
        whole = next(iter(records_dataset(files, b, SEQ, PRED, seed=0).skip(n)))[0]
        ours["equals_uninterrupted_batch"] = bool(np.array_equal(whole["input_word_ids"], x["input_word_ids"]))
        assert ours["equals_uninterrupted_batch"]
    report = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
              "set": {"records": args.records, "files": len(files), "bytes": sum(os.path.getsize(f) for f in files),
                      "batch_size": b, "resume_at_batch": n, "epoch_of_that_batch": n * b // args.records},
              "index_seconds": round(index_seconds, 3), "ours": ours, "skip_peer": peer,
              "ratio_time_to_batch_skip_over_ours": round(peer["seconds_to_batch"] / ours["seconds_to_batch"], 1),
              "ratio_steady_rate_ours_over_skip": round(ours["steady_records_per_s"] /
                                                        peer["steady_records_per_s"], 2)}
    write_json(args.out, report)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
