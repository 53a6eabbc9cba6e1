"""Which version folders under a model's base path can be served: numeric, and complete.

A numeric folder is not always a whole SavedModel: an upload to a bucket stopped before its last file
(storage.publish_tree writes `saved_model.pb` last), a `cp -r` cut short, a folder made by hand. The server skips
such a version, with a line that names it and what it lacks, and serves the newest complete one (a version still
being uploaded is loaded on a later poll, once whole).

    newest_complete("serving/sst2")     # (3, {4: "no saved_model.pb"}): serve 3, 4 is incomplete
"""

from __future__ import annotations

import os
import re

from bert_keras import storage

_DATA = re.compile(r"^variables\.data-(\d+)-of-(\d+)$")


def numeric_versions(model_dir: str) -> list[int]:
    """The version folders TF Serving sees under a model's base path, ascending: numeric names only (export's
    temporary `.N.partial-*` folders are not); [] when there is no such folder.

    Args:
        model_dir: a model's base path (`<base>/<name>`), local or on a bucket.

    Example:
        >>> numeric_versions("serving/sst2")      # doctest: +SKIP
        [1, 2, 3]
    """
    try:
        names = storage.listdir(model_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(v) for v in names if v.isdigit() and storage.isdir(os.path.join(model_dir, v)))


def incomplete(version_dir: str) -> str | None:
    """What a version folder lacks to be a SavedModel a server can load, or None when it has it all:
    `saved_model.pb` (or `.pbtxt`), `variables/variables.index` and every `variables.data-*-of-N` shard. (A file
    cut short inside is the loader's to find: the version is then refused with its reason.)

    Args:
        version_dir: `<base>/<name>/<version>`.

    Example:
        >>> incomplete("serving/sst2/4")          # doctest: +SKIP
        'no saved_model.pb'
    """
    try:
        names = set(storage.listdir(version_dir))
    except (FileNotFoundError, NotADirectoryError):
        return "not a folder"
    if not names & {"saved_model.pb", "saved_model.pbtxt"}:
        return "no saved_model.pb"
    if "variables" not in names:
        return "no variables/ folder"
    try:
        variables = set(storage.listdir(os.path.join(version_dir, "variables")))
    except (FileNotFoundError, NotADirectoryError):
        return "no variables/ folder"
    if "variables.index" not in variables:
        return "no variables/variables.index"
    shards = [m for m in map(_DATA.match, sorted(variables)) if m]
    if not shards:
        return "no variables/variables.data-* file"
    count = int(shards[0].group(2))
    missing = [f"variables.data-{i:05d}-of-{count:05d}" for i in range(count)
               if f"variables.data-{i:05d}-of-{count:05d}" not in variables]
    if missing:
        return f"no variables/{missing[0]}" + (f" (and {len(missing) - 1} more shards)" if len(missing) > 1 else "")
    return None


def newest_complete(model_dir: str, above: int | None = None) -> tuple[int | None, dict[int, str]]:
    """The newest complete version under a base path, and the newer incomplete ones with what each lacks.

    Args:
        model_dir: a model's base path.
        above: look only at versions newer than this one (the version serving); None: all.

    Returns:
        (version or None when there is none, {incomplete version: what it lacks}), the versions newer than the
        one returned (and than `above`).

    Example:
        >>> newest_complete("serving/sst2")       # doctest: +SKIP
        (3, {4: 'no saved_model.pb'})
    """
    skipped = {}
    for version in reversed(numeric_versions(model_dir)):
        if above is not None and version <= above:
            break
        reason = incomplete(os.path.join(model_dir, str(version)))
        if reason is None:
            return version, skipped
        skipped[version] = reason
    return None, skipped
