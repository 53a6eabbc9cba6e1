"""The check of which TensorFlow build is on disk, on fake installed wheels: a temporary site-packages with the
dist-info folders (METADATA, RECORD) of tensorflow-tpu and tensorflow and the files of one of them on disk. The
RECORD lines are written here with hashlib, as pip writes them; tests/test_tpu_wheels.py runs the real wheels."""

import base64
import hashlib
import importlib.metadata
import subprocess
import sys
import textwrap

import pytest

from bert_keras.training import tpu_install
from conftest import REPO

KEY = tpu_install.KEY_FILES
TPU_FILES = {KEY[0]: b"TPU framework library", KEY[1]: b"TPU cc library, longer than the CPU one",
             "tensorflow/__init__.py": b"# shared\n"}
CPU_FILES = {KEY[0]: b"CPU framework library", KEY[1]: b"CPU cc library", "tensorflow/__init__.py": b"# shared\n"}
FIX = "pip install --force-reinstall --no-deps tensorflow-tpu==2.20.0"


def fake_wheel(site, dist_info, files):
    """Writes `dist_info`/METADATA and a RECORD of `files` (path -> bytes) the way pip records a wheel."""
    name, version = dist_info[:-len(".dist-info")].split("-")
    folder = site / dist_info
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip('=')},"
             f"{len(data)}" for path, data in files.items()]
    (folder / "RECORD").write_text("\n".join(lines + [f"{dist_info}/METADATA,,", f"{dist_info}/RECORD,,"]) + "\n")


def unpack(site, files):
    """What pip does when it installs a wheel: its files on disk, over whatever was there."""
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)


@pytest.fixture
def site(tmp_path):
    """Both wheels installed (as `pip install bert_keras[tpu]` leaves them), no files unpacked yet."""
    fake_wheel(tmp_path, "tensorflow_tpu-2.20.0.dist-info", TPU_FILES)
    fake_wheel(tmp_path, "tensorflow-2.20.0.dist-info", CPU_FILES)
    return tmp_path


def test_record_hash_is_what_pip_writes_in_record():
    """Against a RECORD pip wrote: the installed tensorflow's own line for a small file."""
    dist = importlib.metadata.distribution("tensorflow")
    record = next(f for f in dist.files if str(f) == "tensorflow/python/pywrap_tensorflow.py")
    assert tpu_install.record_hash(str(record.locate())) == f"sha256={record.hash.value}"


def test_tpu_files_on_disk_pass(site):
    unpack(site, TPU_FILES)
    assert tpu_install.mismatched_files(tpu_install.find_wheel("tensorflow-tpu", [str(site)])) == []
    assert tpu_install.build_on_disk([str(site)]) == "tensorflow-tpu 2.20.0 (the TPU build)"
    assert tpu_install.overwritten_tpu_build([str(site)]) is None


def test_cpu_files_over_the_tpu_build_name_what_was_found_and_the_fix(site):
    unpack(site, TPU_FILES)
    unpack(site, CPU_FILES)                         # a later install of anything that brings tensorflow
    assert tpu_install.build_on_disk([str(site)]) == "tensorflow 2.20.0 (the CPU build)"
    message = tpu_install.overwritten_tpu_build([str(site)])
    assert message.startswith("tensorflow-tpu 2.20.0 is installed, but the TensorFlow files on disk are not its: "
                              f"{KEY[0]}, {KEY[1]} differ from its RECORD; they are tensorflow 2.20.0 (the CPU "
                              "build).")
    assert f"Fix: `{FIX}`" in message and message.endswith("then restart the runtime")


def test_same_size_different_bytes_is_caught_by_the_hash(site):
    unpack(site, TPU_FILES)
    (site / KEY[0]).write_bytes(b"TPU framework librarX")         # the RECORD's size, another sha256
    assert tpu_install.mismatched_files(tpu_install.find_wheel("tensorflow-tpu", [str(site)])) == [KEY[0]]
    assert tpu_install.build_on_disk([str(site)]).startswith(
        "none of the installed TensorFlow wheels (tensorflow-tpu 2.20.0, tensorflow 2.20.0)")


def test_a_missing_key_file_is_a_mismatch(site):
    unpack(site, {KEY[0]: TPU_FILES[KEY[0]]})
    assert tpu_install.mismatched_files(tpu_install.find_wheel("tensorflow-tpu", [str(site)])) == [KEY[1]]
    assert FIX in tpu_install.overwritten_tpu_build([str(site)])


def test_without_tensorflow_tpu_there_is_nothing_to_reinstall(tmp_path):
    fake_wheel(tmp_path, "tensorflow-2.20.0.dist-info", CPU_FILES)
    unpack(tmp_path, CPU_FILES)
    assert tpu_install.find_wheel("tensorflow-tpu", [str(tmp_path)]) is None
    assert tpu_install.overwritten_tpu_build([str(tmp_path)]) is None
    assert tpu_install.build_on_disk([str(tmp_path)]) == "tensorflow 2.20.0 (the CPU build)"


def test_the_script_runs_without_the_package_and_exits_1_with_the_fix(site):
    """As the notebook runs it: the file alone (no bert_keras import, so no TensorFlow import), on a sys.path."""
    unpack(site, TPU_FILES)
    unpack(site, CPU_FILES)
    script = textwrap.dedent(f"""
        import runpy, sys
        sys.path[:0] = [{str(site)!r}]
        try:
            runpy.run_path({str(REPO / "bert_keras/training/tpu_install.py")!r}, run_name="__main__")
        except SystemExit as e:
            print("imported:", sorted({{"tensorflow", "bert_keras"}} & set(sys.modules)))
            sys.exit(e.code)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == ["TensorFlow on disk: tensorflow 2.20.0 (the CPU build)", "imported: []"]
    assert FIX in result.stderr and "restart the runtime" in result.stderr
