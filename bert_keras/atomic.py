"""Writing without half-written results: build in a temporary path beside the target, then rename into place.

The temporary names come from `tempfile` (mode 0600 for a file, 0700 for a folder); before the rename they get the
mode a plain `open` or `mkdir` would give under the process's umask (0644 / 0755 under umask 0022), so a server
running as another user (a non-root container, a Kubernetes securityContext) can read what was written.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile


def _umask() -> int:
    """The process's umask, read without changing it (Linux: /proc; elsewhere set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_created(path: str, folder: bool = False) -> None:
    """Gives `path` the mode `open`/`mkdir` would have given it under the umask (tempfile's are owner-only)."""
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


@contextlib.contextmanager
def atomic_directory(target: str):
    """Yields a temporary folder; on success it replaces `target`, on any error it is removed."""
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(target)}.partial-")
    try:
        yield tmp
        as_created(tmp, folder=True)
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
        as_created(tmp)
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
