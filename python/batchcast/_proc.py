"""Processes of this machine as /proc shows them: their parents.

What the launcher (batchcast.launch) needs to tell whose a consumer is.
Linux only; a process that is gone reads as None, never an error.
"""
from __future__ import annotations

from typing import Iterable, Optional


def parent(pid: int) -> Optional[int]:
    """The parent of process `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # Field 4, counted after the command name (field 2), which is in
    # parentheses and may hold spaces or ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def owner_of(pid: int, roots: Iterable[int]) -> Optional[int]:
    """The one of `roots` that `pid` is (or descends from), or None."""
    roots = set(roots)
    seen = 0
    while pid and pid not in roots and seen < 64:  # bounded: no cycles in /proc, but be safe
        next_pid = parent(pid)
        if next_pid is None or next_pid == pid:
            return None
        pid, seen = next_pid, seen + 1
    return pid if pid in roots else None
