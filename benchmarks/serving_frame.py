"""The frame the serving benchmarks share (benchmark_serving.py, benchmark_litert.py): their command line and a
temporary work folder for the exports, removed at the end.

    def _main(argv, work):
        args = parse_arguments(argv, __doc__, seconds=10.0, quick_seconds=2.0, out="litert.json")
        ...args.budget...                       # seconds per measurement (--quick's when given)

    def main(argv=None):
        run_in_work_folder(_main, argv, prefix="benchmark_litert_")
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import tempfile

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def parser(doc: str, *, seconds: float, quick_seconds: float, out: str, quick_help: str | None = None
           ) -> argparse.ArgumentParser:
    """The common options: --model, --sentences, --batch-sizes, --seconds, --quick, --out.

    Args:
        doc: the script's docstring (its first line is the description).
        seconds: the default time budget per measurement.
        quick_seconds: the budget under --quick.
        out: the JSON's file name in benchmarks/results/ (the --out default).
        quick_help: --quick's help (default: "<quick_seconds> s per measurement").
    """
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--model", help="a `bert-keras finetune` output folder (default: MiniLM + a fresh head)")
    p.add_argument("--sentences", help="SST-2 dev.tsv")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--seconds", type=float, default=seconds,
                   help=f"time budget per measurement (default {seconds:g})")
    p.add_argument("--quick", action="store_true", help=quick_help or f"{quick_seconds:g} s per measurement")
    p.add_argument("--out", default=str(RESULTS / out))
    p.set_defaults(quick_seconds=quick_seconds)
    return p


def budget(args: argparse.Namespace) -> float:
    """Seconds per measurement: --quick's budget when given, else --seconds."""
    return args.quick_seconds if args.quick else args.seconds


def run_in_work_folder(body, argv, prefix: str, before=None) -> None:
    """Runs `body(argv, work)` with `work` a new temporary folder, removed afterwards (also on failure).

    Args:
        body: the benchmark, `(argv, work) -> None`.
        argv: the command line (None: sys.argv).
        prefix: the folder name's prefix.
        before: an optional `(work) -> None` run first (e.g. to set environment variables that must be set
            before TensorFlow loads).
    """
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        if before is not None:
            before(work)
        body(argv, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
