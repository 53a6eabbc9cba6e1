"""Where a command writes, checked before anything loads: a folder flag that names a file, or a file flag that
names a folder (or lacks the suffix the writer needs), is a one-line CommandError, not a traceback after the load."""

from __future__ import annotations

from bert_keras_cli.errors import CommandError


def output_folder(path: str | None, flag: str) -> None:
    """A folder flag naming an existing file is refused."""
    from bert_keras import storage                 # (here: importing bert_keras loads TensorFlow)
    if path and storage.exists(path) and not storage.isdir(path):
        raise CommandError(f"{flag} {path} is a file: give a folder")


def output_file(path: str | None, flag: str, suffix: str, required: bool = True) -> None:
    """A file flag that is empty (`--npz ''`), names a folder, or (when `required`) lacks the file type's suffix,
    is refused."""
    from bert_keras import storage
    if path is not None and not path.strip():
        raise CommandError(f"{flag} is empty: name the {suffix} file to write")
    if path and storage.isdir(path):
        raise CommandError(f"{flag} {path} is a folder: name the {suffix} file to write")
    if path and required and not path.endswith(suffix):
        raise CommandError(f"{flag} {path}: name a {suffix} file")
