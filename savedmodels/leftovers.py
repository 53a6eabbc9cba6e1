"""What a killed export leaves under a base path, removed by the next export there, and only when no export is
running there.

An export writes each file and folder under a temporary name beside its target, then renames it (atomic.py): a
version as `<base>/<name>/.<version>.partial-xxxx/` (87 MB for MiniLM), `model.keras`, `models.config` and
`batching_parameters.txt` as `.<file>.partial-xxxx`. A kill -9 leaves them, and no server reads them (not
numeric). They are told from the temporaries of an export still running by a lock: each export holds a shared
flock on the base folder while it writes; the one that can take it exclusively first (no other export is
running there) removes the leftovers, then keeps it shared. The kernel drops a killed process's lock, so a
stopped export never blocks the next. Where the lock cannot be taken (no fcntl, a file system without flock, a
bucket: its temporaries are built locally) nothing is removed.

    with exporting("serving") as removed:      # removed: [(path, bytes)] a killed export had left
        export_task_model(model, "serving", "sst2")
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil

from bert_keras import storage

# The temporaries of an export (atomic.py's `.<target>.partial-*`), relative to the base path.
PATTERNS = (".models.config.partial-*", ".batching_parameters.txt.partial-*",
            os.path.join("*", ".model.keras.partial-*"))


def _version_partials(base_path: str) -> list[str]:
    """`<base>/<name>/.<digits>.partial-*` folders."""
    found = glob.glob(os.path.join(glob.escape(base_path), "*", ".*.partial-*"))
    return [p for p in found if os.path.basename(p)[1:].split(".partial-", 1)[0].isdigit()]


def stale_partials(base_path: str) -> list[str]:
    """The temporaries of exports under a local base path, sorted (whether or not an export is writing them).

    Args:
        base_path: the folder exports write `<name>/<version>/` under.

    Example:
        >>> stale_partials("serving")          # doctest: +SKIP
        ['serving/sst2/.3.partial-k2j4f8x1']
    """
    found = _version_partials(base_path)
    for pattern in PATTERNS:
        found += glob.glob(os.path.join(glob.escape(base_path), pattern))
    return sorted(found)


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files
               if os.path.isfile(os.path.join(root, f)))


@contextlib.contextmanager
def exporting(base_path: str):
    """Holds the base path's export lock (shared) while the block writes; first, when no other export is running
    there, removes the temporaries killed exports left (stale_partials).

    Args:
        base_path: the folder TF Serving is pointed at (made if missing).

    Yields:
        [(path, bytes)] of what was removed ([] on a bucket, or when another export is running).

    Example:
        >>> with exporting("serving") as removed:                         # doctest: +SKIP
        ...     export_task_model(model, "serving", "sst2")
    """
    try:
        import fcntl
    except ImportError:                                   # not POSIX: no lock, nothing removed
        fcntl = None
    if storage.is_remote(base_path) or fcntl is None:
        yield []
        return
    os.makedirs(base_path, exist_ok=True)
    fd = os.open(base_path, os.O_RDONLY)
    try:
        removed = []
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:                                   # another export is running (or no flock here)
            pass
        else:
            for path in stale_partials(base_path):
                size = _size(path)
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
                if not os.path.exists(path):
                    removed.append((path, size))
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)                # (from exclusive: a conversion)
        except OSError:
            pass
        yield removed
    finally:
        os.close(fd)
