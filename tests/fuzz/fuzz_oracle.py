"""The bad-input fuzzer's oracle: one generated case run through `bert_keras_cli.main.main(argv)` in this process,
judged with tests/test_bad_input.py's own helpers (`run_main`: anything raised out of main is a traceback;
`assert_one_error_line`: exit 2, one `bert-keras <command>: error:` line once TensorFlow's log lines are set aside,
no traceback) and `files_under` (the shared inputs unchanged). A generated case may also be accepted: exit 0 with
no traceback. Either way nothing half-written may be left: no `.partial-`/`.tmp` file or folder under the case's
folder or in the temporary directory the command sees, and a refused run leaves nothing new in the case's folder
(no --out, no empty folder). The command runs in the case's folder, so a relative path lands there too.

    outcome = run_case(case, inputs, tmp_path, capsys, monkeypatch)
    check_outcome(outcome)
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import signal
import sys
import tempfile

from test_bad_input import assert_one_error_line, files_under, run_main

# What a command writes while it works and renames when done (bert_keras.atomic, storage.publish_tree, the
# pretraining shards' `.partial-<pid>`, tempfile's names in the temporary directory).
HALF_WRITTEN = re.compile(r"(\.partial|\.tmp$|^bert_keras-|^tmp[a-z0-9_]{6,}$)")


class CaseTimeout(BaseException):
    """Raised in the command by the case's time bound (a BaseException, so no `except Exception` swallows it)."""


@dataclasses.dataclass
class Outcome:
    """What one case did: its argv, exit status, stdout, stderr, and its folders."""

    argv: list
    code: int | None
    out: str
    err: str
    case_dir: pathlib.Path
    existed: set


def _bound(seconds: float):
    def expired(signum, frame):
        raise CaseTimeout(f"no exit within the case's {seconds:g} s bound (a run this fuzzer cannot wait for was "
                          "accepted, or the command hangs)")
    return expired


def run_case(case, inputs: dict, tmp_path, capsys, monkeypatch) -> Outcome:
    """Writes the case's files into `tmp_path`, runs `main(argv)` under the case's time bound with $TMPDIR and
    $BERT_KERAS_HOME inside `tmp_path`, and returns its Outcome (a traceback fails the test in `run_main`)."""
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    system_tmp = tmp_path / "system_tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "zoo_cache"))
    if case.prepare is not None:
        case.prepare(case_dir, inputs)
    argv = case.render(inputs, case_dir)
    monkeypatch.chdir(case_dir)
    existed = set(case_dir.rglob("*"))
    before = files_under(inputs["root"])
    # A real stderr writes what it cannot encode as \xNN (Python's errors="backslashreplace" on sys.stderr):
    # capsys's stand-in would raise instead. stdout stays strict, as a UTF-8 terminal's is.
    sys.stderr.reconfigure(errors="backslashreplace")
    previous = signal.signal(signal.SIGALRM, _bound(case.seconds))
    signal.setitimer(signal.ITIMER_REAL, case.seconds)
    try:
        code, out, err = run_main(argv, capsys)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert files_under(inputs["root"]) == before, f"{case.id}: the shared inputs' folder changed"
    return Outcome(argv, code, out, err, case_dir, existed)


def half_written(folder: pathlib.Path) -> list[str]:
    """The paths under `folder` whose names say a writer did not finish (HALF_WRITTEN)."""
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if HALF_WRITTEN.search(p.name)]


def check_outcome(o: Outcome) -> None:
    """The oracle: exit 0 without a traceback, or tests/test_bad_input.py's one-line refusal; nothing
    half-written under the case's folder or in its temporary directory; a refusal leaves no --out."""
    shown = (f"bert-keras {' '.join(map(str, o.argv))}: exit {o.code}\nstderr:\n{o.err[-3000:]}\n"
             f"stdout:\n{o.out[-2000:]}")
    if o.code == 0:
        assert "Traceback" not in o.err and "Traceback" not in o.out, shown
    else:
        assert_one_error_line(o.code, o.out, o.err, [], o.argv)
    left = half_written(o.case_dir) + [f"$TMPDIR/{p}" for p in half_written(o.case_dir.parent / "system_tmp")]
    assert not left, f"half-written files left behind: {left}\n{shown}"
    if o.code != 0:
        made = sorted(str(p.relative_to(o.case_dir)) for p in set(o.case_dir.rglob("*")) - o.existed)
        assert not made, f"a refused run left its output behind: {made}\n{shown}"
