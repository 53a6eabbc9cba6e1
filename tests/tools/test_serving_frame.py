"""benchmarks/serving_frame.py: the command line and work folder benchmark_serving.py and benchmark_litert.py
share."""

import os

import pytest

from serving_frame import budget, parser, run_in_work_folder


def test_quick_takes_its_own_budget_and_seconds_the_given_one():
    p = parser("A benchmark.\n\nmore", seconds=10.0, quick_seconds=2.0, out="x.json")
    assert budget(p.parse_args([])) == 10.0
    assert budget(p.parse_args(["--seconds", "4.5"])) == 4.5
    assert budget(p.parse_args(["--quick"])) == 2.0
    args = p.parse_args(["--model", "runs/sst2", "--sentences", "dev.tsv", "--batch-sizes", "1,8"])
    assert (args.model, args.sentences, args.batch_sizes) == ("runs/sst2", "dev.tsv", "1,8")
    assert args.out.endswith(os.path.join("benchmarks", "results", "x.json"))


def test_the_work_folder_is_removed_after_success_and_failure():
    seen = []

    def body(argv, work):
        open(os.path.join(work, "export.bin"), "w").close()
        seen.append((argv, work, os.environ["SERVING_FRAME_TEST"]))
        if argv == ["fail"]:
            raise RuntimeError("boom")

    def before(work):
        os.environ["SERVING_FRAME_TEST"] = work
    try:
        run_in_work_folder(body, ["ok"], "serving_frame_test_", before=before)
        with pytest.raises(RuntimeError, match="boom"):
            run_in_work_folder(body, ["fail"], "serving_frame_test_", before=before)
    finally:
        os.environ.pop("SERVING_FRAME_TEST", None)
    assert [a for a, _, _ in seen] == [["ok"], ["fail"]]
    for _, work, env in seen:
        assert env == work and os.path.basename(work).startswith("serving_frame_test_")
        assert not os.path.exists(work)

