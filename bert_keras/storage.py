"""Where files live: local paths through `os`, and any path with a scheme (`gs://bucket/run`, TensorFlow's
`ram://`, `hdfs://`) through `tf.io.gfile`, so a run on a spot TPU VM keeps its outputs in Cloud Storage.

Every function takes either kind of path; local paths never import TensorFlow (`bert-keras --version` stays fast).

- Reading: `open`, `exists`, `isdir`, `listdir`. A reader that needs a real local file (h5py, safetensors, the
  tokenizer's vocabulary, a data file) gets one from `local_copy`: a file, a folder or a checkpoint prefix on a
  bucket is copied once per process into a temporary folder that is removed at exit.
- Writing never leaves a half-written result (atomic.py): a file is built locally, uploaded under a temporary name
  beside its target and renamed into place (on Cloud Storage an object appears only whole, and a rename is a
  server-side copy); a folder is built locally and uploaded file by file with its keystone files last
  (`publish_tree`: a SavedModel's `saved_model.pb`, which TF Serving's loader needs before it loads anything).
- gfile's errors (`tf.errors.NotFoundError`, ...) come out as `FileNotFoundError` / `OSError`, as local ones do.

Example:
    >>> from bert_keras import storage
    >>> storage.is_remote("gs://bucket/run"), storage.is_remote("runs/sst2")
    (True, False)
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import os
import re
import shutil
import tempfile
import uuid

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(path) -> bool:
    """Does `path` name a file system by scheme (`gs://`, `ram://`, ...), to be reached through tf.io.gfile?"""
    return isinstance(path, str) and bool(_SCHEME.match(path))


def _gfile():
    import tensorflow as tf
    return tf.io.gfile


@contextlib.contextmanager
def _as_os_errors(path: str):
    """tf.errors from gfile as the OSError a local call raises (FileNotFoundError for NotFoundError)."""
    import tensorflow as tf
    try:
        yield
    except tf.errors.NotFoundError as e:
        raise FileNotFoundError(f"{path}: {e.message}") from None
    except tf.errors.OpError as e:
        raise OSError(f"{path}: {e.message}") from None


def exists(path: str) -> bool:
    """Is there a file or folder at `path`?"""
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
    """Is `path` a folder (on a bucket: a prefix with objects under it)?"""
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
    """Is `path` a file?"""
    return exists(path) and not isdir(path) if is_remote(path) else os.path.isfile(path)


def listdir(path: str) -> list[str]:
    """The names in folder `path` (sub-folders without gfile's trailing `/`).

    Raises:
        FileNotFoundError: no folder at `path`.
    """
    if not is_remote(path):
        return os.listdir(path)
    with _as_os_errors(path):
        return [name.rstrip("/") for name in _gfile().listdir(path)]


def glob(pattern: str) -> list[str]:
    """The paths matching `pattern` (`*`, `?`, `[...]`), sorted."""
    if not is_remote(pattern):
        import glob as local_glob
        return sorted(local_glob.glob(pattern))
    with _as_os_errors(pattern):
        return sorted(_gfile().glob(pattern))


def makedirs(path: str) -> None:
    """Creates folder `path` and its parents; nothing if it exists."""
    if not is_remote(path):
        os.makedirs(path, exist_ok=True)
        return
    with _as_os_errors(path):
        _gfile().makedirs(path)


def remove(path: str) -> None:
    """Deletes file `path`; nothing if it is missing."""
    if not is_remote(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    with contextlib.suppress(FileNotFoundError), _as_os_errors(path):
        _gfile().remove(path)


def rmtree(path: str) -> None:
    """Deletes folder `path` with everything in it; nothing if it is missing."""
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    gfile = _gfile()
    if gfile.exists(path):
        with contextlib.suppress(FileNotFoundError), _as_os_errors(path):
            gfile.rmtree(path)


def open(path: str, mode: str = "r", encoding: str | None = "utf-8"):  # noqa: A001 (the file system's open)
    """`builtins.open` for a local path (text modes in `encoding`), `tf.io.gfile.GFile` for a remote one (text
    modes read and write UTF-8).

    Raises:
        FileNotFoundError: reading a file that is not there.
    """
    if not is_remote(path):
        return builtins.open(path, mode, encoding=None if "b" in mode else encoding)
    if "r" in mode and not _gfile().exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    return _gfile().GFile(path, mode)


def upload_file(local: str, target: str) -> None:
    """Copies local file `local` to remote `target` through a temporary name beside it, renamed into place, so
    `target` is never seen half-written; on an error the temporary object is removed and `target` is as it was.
    Temporary objects of `target` left by a killed process are removed after the rename.

    Raises:
        OSError: the copy or the rename failed (a full bucket, no permission).
    """
    gfile = _gfile()
    parent, name = os.path.dirname(target), os.path.basename(target)
    partial = f"{parent}/.{name}.partial-{uuid.uuid4().hex[:12]}"
    try:
        with _as_os_errors(target):
            gfile.makedirs(parent)
            gfile.copy(local, partial, overwrite=True)
            gfile.rename(partial, target, overwrite=True)
    except BaseException:
        with contextlib.suppress(Exception):
            if gfile.exists(partial):
                gfile.remove(partial)
        raise
    with contextlib.suppress(Exception):                  # a killed upload's leftovers (never read: delete them)
        for stale in gfile.glob(f"{parent}/.{name}.partial-*"):
            gfile.remove(stale)


def publish_tree(local: str, target: str, last: tuple = ()) -> None:
    """Uploads local folder `local` as remote folder `target` (an existing one is replaced): every file through
    `upload_file`, the files named in `last` (basenames, e.g. "saved_model.pb") after all others, so a reader that
    checks for them never opens a folder still being written. On an error what was uploaded is removed.

    Args:
        local: a local folder.
        target: a remote folder (`gs://...`).
        last: names of keystone files, uploaded last.

    Raises:
        OSError: an upload failed (the partial folder is removed).
    """
    files = [os.path.join(root, name) for root, _dirs, names in os.walk(local) for name in names]
    files.sort(key=lambda f: (os.path.basename(f) in last, f))
    rmtree(target)
    try:
        makedirs(target)
        for root, dirs, _names in os.walk(local):          # empty folders too (a SavedModel's assets/)
            for d in dirs:
                makedirs(f"{target}/{os.path.relpath(os.path.join(root, d), local)}")
        for file in files:
            upload_file(file, f"{target}/{os.path.relpath(file, local).replace(os.sep, '/')}")
    except BaseException:
        with contextlib.suppress(Exception):
            rmtree(target)
        raise


_COPIES: dict[tuple, str] = {}
_COPY_ROOT: list[str] = []


def _copy_root() -> str:
    if not _COPY_ROOT:
        root = tempfile.mkdtemp(prefix="bert_keras-remote-")
        atexit.register(shutil.rmtree, root, True)
        _COPY_ROOT.append(root)
    return _COPY_ROOT[0]


def _remote_files(path: str) -> list[tuple[str, str]]:
    """(remote file, its path relative to the copy's parent folder) of everything `local_copy(path)` copies."""
    gfile, name = _gfile(), os.path.basename(path)
    if gfile.glob(path + ".index"):           # a checkpoint prefix (first: some schemes call any prefix a folder)
        parent = os.path.dirname(path)
        found = gfile.glob(path + ".*") + gfile.glob(f"{parent}/*.json") + gfile.glob(f"{parent}/*.txt")
        return [(f, os.path.basename(f)) for f in sorted(set(found))]
    if gfile.isdir(path):
        return [(f"{root.rstrip('/')}/{n}", os.path.normpath(os.path.join(name, os.path.relpath(root.rstrip("/"),
                                                                                              path), n)))
                for root, _dirs, names in gfile.walk(path) for n in names]
    if gfile.exists(path):
        return [(path, name)]
    raise FileNotFoundError(f"no such file or folder: {path}")


def local_copy(path: str | None) -> str | None:
    """`path` itself when it is local (or None, or a name such as a preset); for a remote file, folder or TF
    checkpoint prefix, a local copy of it (for a prefix: its `.index` and `.data-*` files and the folder's
    `.json` and `.txt` files, where its configuration and vocabulary are), in a temporary folder removed at exit;
    copied again only when its files changed (names, sizes, modification times).

    Args:
        path: a path, remote or local, or None.

    Returns:
        A local path to the same content (same basename).

    Raises:
        FileNotFoundError: a remote path with nothing there.

    Example:
        >>> local_copy("runs/sst2/model.keras")
        'runs/sst2/model.keras'
    """
    if not is_remote(path):
        return path
    path = path.rstrip("/")
    gfile = _gfile()
    with _as_os_errors(path):
        files = _remote_files(path)
        stats = [(f, gfile.stat(f)) for f, _ in files]                  # one metadata request a file
        key = (path, tuple((f, stat.length, stat.mtime_nsec) for f, stat in stats))
        if key in _COPIES:
            return _COPIES[key]
        parent = tempfile.mkdtemp(dir=_copy_root())
        os.makedirs(os.path.join(parent, os.path.basename(path)), exist_ok=True) if not files else None
        for remote, relative in files:
            os.makedirs(os.path.dirname(os.path.join(parent, relative)), exist_ok=True)
            gfile.copy(remote, os.path.join(parent, relative), overwrite=True)
    _COPIES[key] = os.path.join(parent, os.path.basename(path))
    return _COPIES[key]
