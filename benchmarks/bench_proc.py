"""CPU time of processes and threads as /proc shows them (Linux), for the
benchmarks' "cores used" figures: CPU seconds over a window / its wall seconds.

A process or thread that is gone reads as None (or is left out), never an error.
"""
import os
from typing import Dict, Iterable, List, Optional, Tuple

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(path: str) -> Optional[Tuple[str, List[str]]]:
    """The command name and the fields after it (field 3 onwards) of a /proc
    stat file (a process's or a thread's), or None when it is gone."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The name is in parentheses and may hold spaces or ')'.
    return text[text.find("(") + 1:text.rfind(")")], text[text.rfind(")") + 2:].split()


def _cpu(fields: List[str]) -> float:
    """User + system CPU seconds from stat fields 3 onwards (utime, stime: fields 14, 15)."""
    return (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_seconds(pid: int) -> Optional[float]:
    """User + system CPU seconds of a process (all its threads), or None when it is gone."""
    stat = _stat(f"/proc/{pid}/stat")
    return _cpu(stat[1]) if stat else None


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
            total += _cpu(stat[1])
    return total


def descendants(pids: Iterable[int]) -> List[int]:
    """Every process below `pids` (children, their children, ...), not `pids` themselves."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        stat = _stat(f"/proc/{entry}/stat") if entry.isdigit() else None
        if stat:
            children.setdefault(int(stat[1][1]), []).append(int(entry))  # field 4: the parent
    out: List[int] = []
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


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
