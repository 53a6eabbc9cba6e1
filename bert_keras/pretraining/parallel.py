"""One helper: a function mapped over items on a thread per core, results in order, memory bounded.

For work that runs without Python's GIL (TF ops called eagerly, NumPy on whole arrays): the pretraining data
tool tokenizes and encodes records this way, so both cores of a small machine work."""

from __future__ import annotations

import collections
import os
from concurrent.futures import ThreadPoolExecutor


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (taskset, a container's cpuset, a batch system's
    allocation), which os.cpu_count() ignores; os.cpu_count() where there is no affinity (macOS, Windows)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def default_threads() -> int:
    """A thread per usable core, at most 4."""
    return min(4, usable_cores())


def ordered_map(fn, items, threads: int | None = None):
    """Yields fn(item) for each item, in the items' order. At most 2 * threads calls run or wait ahead of the
    consumer, so results that are not consumed yet never pile up. `threads`: default_threads()."""
    threads = threads or default_threads()
    with ThreadPoolExecutor(threads) as pool:
        pending = collections.deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
