"""Where a command writes, checked before anything loads: a folder flag that names a file, or a file flag that
names a folder (or lacks the suffix the writer needs), is a one-line CommandError, not a traceback after the load."""

from __future__ import annotations

from bert_keras_cli.errors import CommandError


def _writable_path(path: str, flag: str) -> None:
    """A path that is not UTF-8 (argv keeps such bytes as lone surrogates, which TensorFlow cannot take and stdout
    cannot print), or one below an existing file, is refused."""
    import os

    from bert_keras import storage
    from bert_keras_cli.text_args import check_utf8_text
    check_utf8_text(path, flag)
    if storage.is_remote(path):
        return
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise CommandError(f"{flag} {path} is inside {parent}, a file: give a path in a folder")


def output_folder(path: str | None, flag: str) -> None:
    """A folder flag naming an existing file, a path inside a file, or a path that is not UTF-8 is refused."""
    from bert_keras import storage                 # (here: importing bert_keras loads TensorFlow)
    if path:
        _writable_path(path, flag)
    if path and storage.exists(path) and not storage.isdir(path):
        raise CommandError(f"{flag} {path} is a file: give a folder")


def output_file(path: str | None, flag: str, suffix: str, required: bool = True) -> None:
    """A file flag that is empty (`--npz ''`), names a folder, lies inside a file, is not UTF-8, or (when
    `required`) lacks the file type's suffix, is refused."""
    from bert_keras import storage
    if path is not None and not path.strip():
        raise CommandError(f"{flag} is empty: name the {suffix} file to write")
    if path:
        _writable_path(path, flag)
    if path and storage.isdir(path):
        raise CommandError(f"{flag} {path} is a folder: name the {suffix} file to write")
    if path and required and not path.endswith(suffix):
        raise CommandError(f"{flag} {path}: name a {suffix} file")
