"""CUDA hardware queues for a GPU server in this process.

Note [Hardware queues] (cuda/include/batchcast/cuda/hardware_queues.h): CUDA
gives a process CUDA_DEVICE_MAX_CONNECTIONS hardware queues (default 8),
read when the process starts CUDA. A GPU :class:`batchcast.Server` in a
training process shares them with the trainer, and with 8 its decode waits
behind the training kernels queued ahead of it. So the Server asks for 32
for the CUDA start it makes itself (the variable set for that moment only,
so that processes started later, a batchcast-server among them, keep CUDA's
default, which suits a server process), and warns when CUDA had already
started in the process with fewer. The variable's value and the device
option are read as the C++ library reads them (_core.hardware_queues,
_core.parse_devices).
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator, Optional

from batchcast import _core

ENV = "CUDA_DEVICE_MAX_CONNECTIONS"
PREFERRED: int = _core.MAX_HARDWARE_QUEUES


def on_gpu(device: Any) -> bool:
    """Whether a Server's `device` option puts a ring on a GPU, as the
    server reads it; a value it refuses is not (the start says why)."""
    if not isinstance(device, str):
        return False
    try:
        return _core.parse_devices(device) != []
    except _core.InvalidArgument:
        return False


def cuda_started() -> bool:
    """Whether CUDA has started in this process, as far as torch knows
    (without importing it)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA, or half imported
        return False


def shortfall(started_before: bool, value: Optional[str]) -> Optional[str]:
    """Why a GPU server in this process shares too few queues with the
    process's other CUDA work, or None. `started_before`: CUDA had started
    before the server; `value`: the variable then."""
    queues = _core.hardware_queues(value) if started_before else PREFERRED
    if queues >= PREFERRED:
        return None
    how = f"{ENV}={value}" if value is not None else f"{ENV} unset: CUDA's default"
    advice = (f"create the Server before any other CUDA work, or start the process with "
              f"{ENV}={PREFERRED}" if queues > 1 else
              f"with {ENV}=1 (which orders all kernels) run the server as its own process")
    return (f"batchcast.Server on a GPU shares this process's {queues} CUDA hardware queue"
            f"{'s' if queues != 1 else ''} ({how}; CUDA started before the Server) with the "
            f"process's other CUDA work: the server's decode waits behind the kernels queued "
            f"ahead of it, and a trainer fed from it waits for data; {advice} (Note "
            f"[Hardware queues])")


@contextlib.contextmanager
def for_server_start(device: Any) -> Iterator[Optional[str]]:
    """Around the start of a Server with the option `device`: on a GPU, with
    CUDA not started and the variable unset, sets it to 32 for the start
    (restored after); yields the shortfall() text, or None."""
    if not on_gpu(device):
        yield None
        return
    started = cuda_started()
    value = os.environ.get(ENV)
    ours = not started and value is None
    if ours:
        os.environ[ENV] = str(PREFERRED)
    try:
        yield shortfall(started, value)
    finally:
        if ours and os.environ.get(ENV) == str(PREFERRED):
            del os.environ[ENV]
