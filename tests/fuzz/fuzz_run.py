"""One fuzz case run and judged (fuzz_oracle), as every fuzz test module does it.

    run_and_check(case, fuzz_inputs, tmp_path, capsys, monkeypatch)
"""

from __future__ import annotations

import pytest

from fuzz_oracle import check_outcome, run_case


def run_and_check(case, inputs, tmp_path, capsys, monkeypatch) -> None:
    """Runs `case` and applies the oracle; a heavy case still running at its bound is skipped (a run started)."""
    if case.id.startswith("serve-export"):                   # built only when drawn (an export takes a while)
        _ensure_export(inputs)
    try:
        outcome = run_case(case, inputs, tmp_path, capsys, monkeypatch)
        check_outcome(outcome)
        return
    except (pytest.fail.Exception, AssertionError) as e:
        if case.heavy and "CaseTimeout" in str(e):
            pytest.skip(f"accepted: still running at its {case.seconds:g} s bound (a run this fuzzer does not "
                        "wait for)")
        message = str(e).encode("utf-8", "backslashreplace").decode("utf-8")
        if message == str(e):
            raise
    # An undecodable argument (a surrogate) in the report would stop pytest-xdist's workers from sending it: the
    # failure again with it escaped, outside the `except` (so the report does not chain the original).
    pytest.fail(message)


def _ensure_export(inputs) -> None:
    """inputs["export"], built on first use (fuzz_inputs.build_export)."""
    if "export" not in inputs:
        from fuzz_inputs import build_export
        build_export(inputs)
