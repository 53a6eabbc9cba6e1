"""Writing without half-written results: build in a temporary path beside the target, then rename into place.

The temporary names come from `tempfile` (mode 0600 for a file, 0700 for a folder); before the rename they get the
mode a plain `open` or `mkdir` would give under the process's umask (0644 / 0755 under umask 0022), so a server
running as another user (a non-root container, a Kubernetes securityContext) can read what was written.

A remote target (`gs://...`: storage.py) is built in a local temporary path the same way and then uploaded: a file
under a temporary name beside the target, renamed into place; a folder file by file, its keystone files (`last`)
after the others, since a bucket has no folder rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile

from bert_keras import storage


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
def atomic_directory(target: str, last: tuple = ()):
    """Yields a temporary folder; on success it replaces `target`, on any error it is removed. A remote `target`
    is uploaded with the files named in `last` (e.g. "saved_model.pb") after all others (storage.publish_tree)."""
    if storage.is_remote(target):
        with tempfile.TemporaryDirectory(prefix="bert_keras-") as tmp:
            yield tmp
            storage.publish_tree(tmp, target, last)
        return
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
    """Yields a temporary file path (same suffix as `target`); on success it is renamed to `target` (uploaded and
    renamed, for a remote `target`)."""
    if storage.is_remote(target):
        fd, tmp = tempfile.mkstemp(prefix="bert_keras-", suffix=os.path.splitext(target)[1])
        os.close(fd)
        try:
            yield tmp
            storage.upload_file(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
        return
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
