"""The folder of `pretraining-data --out PREFIX` (data/wiki -> data/): created for the run, removed again when the
run refuses its input, so a refused run leaves no empty folder behind."""

from __future__ import annotations

import os

from bert_keras import storage


def make_output_folder(out: str) -> list[str]:
    """Creates the folder the shards of prefix `out` go to; returns the folders it created, deepest first
    ([] when it existed, or for a bucket's prefix, which needs none).

    Args:
        out: the output prefix (local, or gs://...).

    Returns:
        list of str, for `remove_created_folders`.

    Example:
        >>> make_output_folder("new/data/wiki")                                  # doctest: +SKIP
        ['/work/new/data', '/work/new']
    """
    if storage.is_remote(out):
        return []
    folder = os.path.dirname(os.path.abspath(out))
    created, path = [], folder
    while not os.path.exists(path):
        created.append(path)
        path = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    return created


def remove_created_folders(created: list[str]) -> None:
    """Removes the folders `make_output_folder` created, deepest first, while they are empty.

    Args:
        created: its return value.

    Example:
        >>> remove_created_folders(make_output_folder("new/data/wiki"))          # doctest: +SKIP
    """
    for folder in created:
        try:
            os.rmdir(folder)
        except OSError:                     # not empty (something else wrote there), or already gone
            return
