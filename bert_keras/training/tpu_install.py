"""Which TensorFlow build is on disk: the TPU wheel's files or the CPU wheel's, read from the wheels' RECORDs.

`tensorflow` (the CPU build, which tensorflow-text requires) and `tensorflow-tpu` (the TPU build, with libtpu) both
write the same `tensorflow/` package; whichever wheel pip unpacked last wins, and both stay "installed". Only the
files tell them apart. Each wheel's RECORD (importlib.metadata) holds the sha256 and size of every file it wrote;
this module compares two key files on disk with them. The shared libraries differ between the builds
(`libtensorflow_cc.so.2`: 733 MB in tensorflow-tpu 2.20.0, 1,019 MB in tensorflow 2.20.0); the
`_pywrap_tensorflow_internal` stub is byte-identical in both, so it cannot tell them apart. A file whose size
differs from the RECORD is not hashed.

The module needs only the standard library and never imports TensorFlow (a half-overwritten `tensorflow/` may not
import), so the notebook runs it as a script right after pip:

    python .../bert_keras/training/tpu_install.py      # python -m bert_keras.training.tpu_install imports
                                                       # bert_keras, and so TensorFlow, first

It prints the build on disk and exits 1, with the fix, when tensorflow-tpu is installed but its files are not
the ones on disk.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import sys

TPU_WHEEL = "tensorflow-tpu"
# The other wheels that write tensorflow/ (to name what is on disk instead of the TPU build).
OTHER_WHEELS = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tf-nightly", "tf-nightly-cpu")
KEY_FILES = ("tensorflow/libtensorflow_framework.so.2", "tensorflow/libtensorflow_cc.so.2")
# A libtpu each TPU build can load. tensorflow-tpu 2.20.0 asks for libtpu~=0.0.14, but PyPI's 0.0.32 and later lack
# functions it looks up at import ("X not available in this library", then abort); 0.0.14-0.0.31 have all 212
# (docs/tpu.md). The `tpu` extra pins the same version.
LIBTPU = {"2.20.0": "0.0.21"}


def install_command(version: str) -> str:
    """The pip command that installs TensorFlow's TPU build `version` with a libtpu it can load.

    Example:
        >>> install_command("2.20.0")
        'pip install tensorflow-tpu==2.20.0 libtpu==0.0.21'
    """
    libtpu = f" libtpu=={LIBTPU[version]}" if version in LIBTPU else ""
    return f"pip install {TPU_WHEEL}=={version}{libtpu}"


def record_hash(path: str) -> str:
    """A file's hash as a wheel's RECORD writes it: `sha256=` and the urlsafe base64 digest without padding.

    Args:
        path: the file to hash (read in 8 MiB chunks).

    Example:
        >>> record_hash(__file__).startswith("sha256=")
        True
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def find_wheel(name: str, path: list[str] | None = None) -> importlib.metadata.Distribution | None:
    """The installed distribution called `name` on `path` (default: sys.path), or None."""
    where = {} if path is None else {"path": path}
    return next(iter(importlib.metadata.distributions(name=name, **where)), None)


def mismatched_files(dist: importlib.metadata.Distribution, key_files=KEY_FILES) -> list[str]:
    """The key files on disk that are not the ones `dist` installed (missing ones too), by its RECORD.

    Args:
        dist: an installed wheel (importlib.metadata), e.g. `find_wheel("tensorflow-tpu")`.
        key_files: paths relative to site-packages, as RECORD writes them.

    Returns:
        The subset of `key_files` that are missing on disk, absent from the RECORD, or differ from it in size or
        sha256 (an empty list: every key file is this wheel's).

    Example:
        >>> mismatched_files(find_wheel("tensorflow-tpu"))   # doctest: +SKIP
        ['tensorflow/libtensorflow_framework.so.2', 'tensorflow/libtensorflow_cc.so.2']   # the CPU build is on disk
    """
    records = {str(f): f for f in dist.files or ()}
    wrong = []
    for name in key_files:
        record = records.get(name)
        if record is None or record.hash is None:
            wrong.append(name)
            continue
        on_disk = str(record.locate())
        if (not os.path.isfile(on_disk) or (record.size is not None and os.path.getsize(on_disk) != record.size)
                or record_hash(on_disk) != f"{record.hash.mode}={record.hash.value}"):
            wrong.append(name)
    return wrong


def build_on_disk(path: list[str] | None = None, key_files=KEY_FILES) -> str:
    """Which installed wheel's `tensorflow/` files are on disk, e.g. "tensorflow-tpu 2.20.0 (the TPU build)".

    Checks tensorflow-tpu first, then the CPU wheels (OTHER_WHEELS); "none" when no installed wheel's RECORD
    matches the key files (a mix of two wheels, or a build from source).

    Args:
        path: the folders to look for installed wheels in (default: sys.path).
        key_files: the files to compare, relative to site-packages.

    Example:
        >>> build_on_disk()   # doctest: +SKIP
        'tensorflow 2.20.0 (the CPU build)'
    """
    for name in (TPU_WHEEL, *OTHER_WHEELS):
        dist = find_wheel(name, path)
        if dist is not None and not mismatched_files(dist, key_files):
            kind = "the TPU build" if name == TPU_WHEEL else "the CPU build"
            return f"{name} {dist.version} ({kind})"
    installed = [f"{n} {d.version}" for n in (TPU_WHEEL, *OTHER_WHEELS) if (d := find_wheel(n, path)) is not None]
    return (f"none of the installed TensorFlow wheels ({', '.join(installed) or 'none installed'}): "
            f"{', '.join(key_files)} match no RECORD")


def overwritten_tpu_build(path: list[str] | None = None, key_files=KEY_FILES) -> str | None:
    """Why the TPU build is installed but not on disk, with the fix; None when it is on disk or not installed.

    Args:
        path: the folders to look for installed wheels in (default: sys.path).
        key_files: the files to compare, relative to site-packages.

    Returns:
        None when tensorflow-tpu is not installed at all (that is a different fix: install it) or when its key
        files are the ones on disk; else a message: the files found, whose they are, the fix
        (`pip install --force-reinstall --no-deps tensorflow-tpu==<version>`) and "restart the runtime".

    Example:
        >>> overwritten_tpu_build() is None   # doctest: +SKIP
        True
    """
    tpu = find_wheel(TPU_WHEEL, path)
    if tpu is None:
        return None
    wrong = mismatched_files(tpu, key_files)
    if not wrong:
        return None
    found = build_on_disk(path, key_files)
    return (f"{TPU_WHEEL} {tpu.version} is installed, but the TensorFlow files on disk are not its: "
            f"{', '.join(wrong)} differ from its RECORD; they are {found}. Both wheels write tensorflow/ and the one "
            f"pip unpacked last wins (tensorflow-text requires the CPU `tensorflow`, so installing anything that "
            f"depends on it can put the CPU build back), and the CPU build cannot see a TPU. Fix: "
            f"`pip install --force-reinstall --no-deps {TPU_WHEEL}=={tpu.version}` (in a notebook: %pip install "
            f"...), then restart the runtime")


def main() -> int:
    """Print the TensorFlow build on disk; exit 1 with the fix when tensorflow-tpu is installed but overwritten."""
    print(f"TensorFlow on disk: {build_on_disk()}")
    problem = overwritten_tpu_build()
    if problem:
        print(problem + ".", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
