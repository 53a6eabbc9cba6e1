"""A rerun of `bert-keras export` removes what a killed export left under the base path (issue 55: kill -9 during
export left `<base>/<name>/.3.partial-*`, 87 MB, for good), and never what a running export is writing: an
export holds the base folder's lock while it writes, and the kernel drops a killed process's lock."""

import os
import pathlib
import signal
import subprocess
import sys
import tempfile

from savedmodels.leftovers import exporting, stale_partials
from test_bad_input import run_main

HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH)          # what an export holds while it writes (savedmodels/leftovers.py)
print("holding", flush=True)
sys.stdin.read()
"""


def leave_partials(base: pathlib.Path) -> dict:
    """What a kill -9 leaves at each step of an export (atomic.py's temporary names), and files to keep."""
    (base / "sst2" / "1").mkdir(parents=True)
    version = pathlib.Path(tempfile.mkdtemp(dir=base / "sst2", prefix=".3.partial-"))     # atomic_directory's
    (version / "variables").mkdir()
    (version / "variables" / "variables.data-00000-of-00001").write_bytes(b"\0" * 1_000_000)
    keras_file = pathlib.Path(tempfile.mkstemp(dir=base / "sst2", prefix=".model.keras.partial-", suffix=".keras")[1])
    config = pathlib.Path(tempfile.mkstemp(dir=base, prefix=".models.config.partial-")[1])
    keep = [base / "sst2" / "1", base / "sst2" / ".notes", base / "sst2" / ".draft.partial-x", base / "other.partial-1"]
    for path in keep[1:]:
        path.write_text("not an export's")
    return {"removed": sorted(map(str, (version, keras_file, config))), "keep": keep}


def test_leftovers_are_removed_only_when_no_export_holds_the_lock(tmp_path):
    base = tmp_path / "serving"
    files = leave_partials(base)
    assert stale_partials(str(base)) == files["removed"]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(base)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        with exporting(str(base)) as removed:                     # another export is running: nothing goes
            assert removed == []
        assert stale_partials(str(base)) == files["removed"]
    finally:
        holder.send_signal(signal.SIGKILL)                        # killed as a kill -9 kills an export
        holder.wait()
    with exporting(str(base)) as removed:
        assert sorted(path for path, _ in removed) == files["removed"]
        assert sum(size for _, size in removed) == 1_000_000
    assert stale_partials(str(base)) == []
    assert all(path.exists() for path in files["keep"])


def test_a_rerun_of_export_removes_what_a_killed_export_left(tmp_path, task_models, capsys):
    base = tmp_path / "serving"
    files = leave_partials(base)
    model = tmp_path / "model.keras"
    task_models["sst2"].save(model)
    code, out, err = run_main(["export", "--model", model, "--base-path", base, "--name", "sst2"], capsys)
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.startswith("removed")]
    assert line.startswith("removed 3 temporary file(s) or folder(s) a stopped export left (1.0 MB): ")
    assert sorted(line.split(": ", 1)[1].split(", ")) == files["removed"]
    assert not any(os.path.exists(p) for p in files["removed"])
    assert all(path.exists() for path in files["keep"])
    assert (base / "sst2" / "2" / "saved_model.pb").exists()                 # the next version, whole
    assert sorted(p.name for p in (base / "sst2").iterdir() if p.name.startswith(".")) == [".draft.partial-x",
                                                                                            ".notes"]
