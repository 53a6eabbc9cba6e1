"""A process's children and pool workers, read from /proc (Linux): what the pretraining-data restart test and its
benchmark kill, and the wait until the killed ones are gone.

    workers = pool_workers(command_pid)
"""

from __future__ import annotations

import os
import time


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: its children, theirs, and so on."""
    out = children(pid)
    return out + [d for c in out for d in descendants(c)]


def pool_workers(pid: int) -> list[int]:
    """The pool's workers: forked from the command itself (local paths), or the children of its forkserver
    (then the command's other child, the resource tracker, has none)."""
    from_server = [c for k in children(pid) for c in children(k)]
    return from_server or children(pid)


def alive(pid: int) -> bool:
    """Is `pid` running (a zombie, waiting for its parent to reap it, is not)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout: float = 60) -> None:
    """Waits until none of `pids` is alive; fails after `timeout` seconds if one still is."""
    deadline = time.time() + timeout
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(alive(p) for p in pids), "processes of a killed run linger"
