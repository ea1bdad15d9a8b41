"""Processes of this machine as /proc shows them: CPU time, parents, descendants.

What the launcher (batchcast.launch) and the co-location benchmark
(benchmarks/colocate.py) need to tell whose a consumer is and how much CPU
a set of processes used. Linux only; a process that is gone reads as None /
is left out, never an error.
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional, Tuple

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(path: str) -> Optional[Tuple[str, List[str]]]:
    """The command name (field 2) and the fields after it (field 3 onwards) of
    a /proc stat file (a process's or a thread's), or None when it is gone."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The name is in parentheses and may hold spaces or ')'.
    return text[text.find("(") + 1:text.rfind(")")], text[text.rfind(")") + 2:].split()


def _stat_fields(pid: int) -> Optional[List[str]]:
    """The fields of /proc/PID/stat after the command name (field 3 onwards), or None."""
    stat = _stat(f"/proc/{pid}/stat")
    return stat[1] if stat else None


def _cpu(fields: Optional[List[str]]) -> Optional[float]:
    """User + system CPU seconds from stat fields (3 onwards), or None."""
    if fields is None or len(fields) < 13:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def cpu_seconds(pid: int) -> Optional[float]:
    """User + system CPU seconds of a process (all its threads), or None when it is gone."""
    return _cpu(_stat_fields(pid))


def server_thread_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the batchcast server threads of process
    `pid` (threads named bc-*, core/src/thread_name.h; not the Loaders'
    bc-flush threads, nor CUDA's or nvJPEG's own): a batchcast.Server's
    share of a process it shares with a trainer. 0.0 when it is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    total = 0.0
    for tid in tids:
        stat = _stat(f"/proc/{pid}/task/{tid}/stat")  # None: the thread ended
        if stat and stat[0].startswith("bc-") and stat[0] != "bc-flush":
            total += _cpu(stat[1]) or 0.0
    return total


def parent(pid: int) -> Optional[int]:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def _parents() -> Dict[int, int]:
    """{pid: parent pid} of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = parent(int(entry))
            if ppid is not None:
                out[int(entry)] = ppid
    return out


def descendants(pids: Iterable[int]) -> List[int]:
    """Every process below `pids` (children, their children, ...), not `pids` themselves."""
    children: Dict[int, List[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    out: List[int] = []
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


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


class CpuMeter:
    """CPU seconds used by a changing set of processes between two readings.

    read(pids) returns {pid: cpu seconds}; used(before, after) sums what the
    processes present in both readings used in between (a process that
    started or ended meanwhile counts from/until its reading only)."""

    @staticmethod
    def read(pids: Iterable[int]) -> Dict[int, float]:
        out = {}
        for pid in pids:
            s = cpu_seconds(pid)
            if s is not None:
                out[pid] = s
        return out

    @staticmethod
    def used(before: Dict[int, float], after: Dict[int, float]) -> float:
        return sum(max(0.0, after[p] - before[p]) for p in after if p in before)
