"""batchcast-launch: the job command templates.

Job k's command is the command after ``--`` with {name}, {endpoint}, {rank}
(also {job}), {jobs}, the --each NAME lists' {NAME} and the k-th item of each
{a,b,c} list replaced (see batchcast.launch); other braces stay as they are.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence

_FIELD = re.compile(r"\{([^{}]*)\}")
_NAMED = ("name", "endpoint", "rank", "job", "jobs")


def list_lengths(command: Sequence[str]) -> List[int]:
    """Lengths of the {a,b,...} lists in `command`."""
    return [len(m.group(1).split(",")) for arg in command for m in _FIELD.finditer(arg)
            if m.group(1) not in _NAMED and "," in m.group(1)]


def parse_each(specs: Sequence[str]) -> Dict[str, List[str]]:
    """{NAME: [values]} of --each NAME=V1,V2,... options. Raises ValueError."""
    out: Dict[str, List[str]] = {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        if not eq or not name.isidentifier() or name in _NAMED:
            raise ValueError(f"--each takes NAME=V1,V2,... with a NAME other than "
                             f"{', '.join(_NAMED)}; got {spec!r}")
        out[name] = values.split(",")
    return out


def expand(command: Sequence[str], job: int, jobs: int, name: str, endpoint: str,
           each: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """The command of job `job`; `each` holds the --each lists. Raises
    ValueError for a list whose length is not `jobs`."""
    def pick(items: List[str], what: str) -> str:
        if len(items) != jobs:
            raise ValueError(f"{what} has {len(items)} items for {jobs} jobs: give one per job")
        return items[job]

    values = {"name": name, "endpoint": endpoint, "rank": str(job), "job": str(job),
              "jobs": str(jobs)}
    for key, items in (each or {}).items():
        values[key] = pick(items, f"--each {key}=")

    def field(m: "re.Match[str]") -> str:
        inner = m.group(1)
        if inner in values:
            return values[inner]
        if "," not in inner:
            return m.group(0)  # not ours: {} or {x} stay as they are
        return pick(inner.split(","), m.group(0))

    return [_FIELD.sub(field, arg) for arg in command]
