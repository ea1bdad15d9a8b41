"""CUDA hardware queues for a server in this process.

Note [Hardware queues] (cuda/include/batchcast/cuda/hardware_queues.h): a
CUDA context gets CUDA_DEVICE_MAX_CONNECTIONS hardware queues (default 8),
read when the process creates its context. A GPU :class:`batchcast.Server`
in a training process shares them with the trainer's stream, and its decode
then waits behind the training kernels queued ahead of it. ``import
batchcast`` asks for 32 (unless the variable is set); that works when no
CUDA context exists yet, so :class:`batchcast.Server` warns when the one of
its process was created with fewer.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

ENV = "CUDA_DEVICE_MAX_CONNECTIONS"
PREFERRED = 32  # cuda::kMaxHardwareQueues
DEFAULT = 8  # CUDA's default


def parse(value: Optional[str]) -> int:
    """The queues a context created with this value gets (as cuda::HardwareQueues)."""
    try:
        n = int(value) if value is not None and value.strip() == value else 0
    except ValueError:
        n = 0
    return n if 1 <= n <= PREFERRED else DEFAULT


def cuda_started() -> bool:
    """Whether this process already has a CUDA context, as far as torch says
    (without importing it)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA, or half imported
        return False


class _State:
    """What held when batchcast was imported."""

    value_at_import: Optional[str] = None
    cuda_started_at_import = False


def prefer_many() -> None:
    """At ``import batchcast``: remembers the variable and whether CUDA had
    started, then sets the variable to 32 unless it is set."""
    _State.value_at_import = os.environ.get(ENV)
    _State.cuda_started_at_import = cuda_started()
    os.environ.setdefault(ENV, str(PREFERRED))


def shortfall(value_at_import: Optional[str], cuda_started_at_import: bool,
              value_now: Optional[str]) -> Optional[str]:
    """Why a GPU server in this process would share too few hardware queues
    with the trainer, or None: a context created before the import got the
    value of then; one created since, the value of now."""
    value = value_at_import if cuda_started_at_import else value_now
    queues = parse(value)
    if queues >= PREFERRED:
        return None
    how = (f"{ENV}={value}" if value is not None else f"{ENV} unset, CUDA's default")
    if cuda_started_at_import:
        how += ", CUDA started before `import batchcast`"
    advice = (f"import batchcast before any CUDA work, or set {ENV}={PREFERRED} in the environment"
              if queues > 1 else
              f"with {ENV}=1 (which orders all kernels) run the server as its own process")
    return (f"batchcast.Server on a GPU shares this process's {queues} CUDA hardware queue"
            f"{'s' if queues != 1 else ''} ({how}) with its other CUDA work: the server's "
            f"decode waits behind the kernels queued ahead of it, and a trainer fed from it "
            f"waits for data; {advice} (Note [Hardware queues])")


def check_server_process() -> Optional[str]:
    """shortfall() for this process."""
    return shortfall(_State.value_at_import, _State.cuda_started_at_import, os.environ.get(ENV))
