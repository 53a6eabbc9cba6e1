"""Writing without half-written results: build in a temporary path beside the target, then rename into place."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile


@contextlib.contextmanager
def atomic_directory(target: str):
    """Yields a temporary folder; on success it replaces `target`, on any error it is removed."""
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(target)}.partial-")
    try:
        yield tmp
        if os.path.exists(target):
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_file(target: str):
    """Yields a temporary file path (same suffix as `target`); on success it is renamed to `target`."""
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    suffix = os.path.splitext(target)[1]
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(target)}.partial-", suffix=suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json(target: str, value, **dump_args) -> None:
    """`value` as UTF-8 JSON at `target` (indent 1 unless given), written through atomic_file."""
    dump_args.setdefault("indent", 1)
    with atomic_file(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, **dump_args)
