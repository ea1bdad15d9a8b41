"""batchcast: one process decodes and augments every sample once; several
training processes read the batches zero-copy from shared memory.

Two lines replace a DataLoader in a training script::

    import batchcast
    loader = batchcast.Loader("demo", batch_size=64)     # instead of DataLoader(...)
    for epoch in range(epochs):
        for images, labels in loader:                     # torch tensors, zero-copy
            ...

The server runs as ``batchcast-server serve DATA --name demo ...``, in-process
(:class:`Server`), or fed from any Python iterable such as an existing
DataLoader (:class:`Producer`). See docs/semantics.md ("Consumer semantics") for
epochs, join policies, the window and leases.

Public API:

- :class:`Loader` (consumer), :class:`Server` (built-in pipeline in-process),
  :class:`Producer` (serve a Python iterable);
- :func:`query_stats` (a server's stats without joining it);
  :func:`set_log_level` (the native library's log level);
- exceptions, all subclasses of :class:`BatchcastError` (a RuntimeError):
  :class:`InvalidArgument` (also ValueError), :class:`NotFound` (also
  FileNotFoundError), :class:`ServerUnavailable` (also ConnectionError),
  :class:`Timeout` (also TimeoutError), :class:`ResourceExhausted` (alias
  :data:`Evicted`), :class:`EndOfStream`, :class:`Cancelled`,
  :class:`PermissionDenied` (also PermissionError), :class:`DataLoss`,
  :class:`InternalError`.
"""
from __future__ import annotations

import json as _json
from typing import Any, Dict, Optional

from batchcast import _check, _core
from batchcast import _errors
from batchcast._errors import *  # noqa: F401,F403  (the exception classes; see _errors.__all__)
from batchcast._loader import Loader
from batchcast._producer import Producer
from batchcast._server import SERVER_OPTIONS, Server

__version__ = _core.__version__


def query_stats(endpoint_or_name: str, timeout: Optional[float] = 3.0,
                key_file: Optional[str] = None) -> Dict[str, Any]:
    """The stats of a running server (as ``batchcast-server stat NAME --json``), without
    joining its stream. Raises NotFound when no server of that name runs. ``key_file``:
    as for :class:`Loader` (``tcp://`` endpoints only)."""
    endpoint = _check.text("endpoint_or_name", endpoint_or_name, path=True)
    key_file = _check.text("key_file", key_file, optional=True, path=True)
    return _json.loads(_core.query_stats(
        endpoint, _check.seconds("timeout", timeout, positive=True),
        key_file or ""))


def set_log_level(level: str) -> None:
    """The native library's log level: trace, debug, info (default), warn, error or off."""
    if level not in ("trace", "debug", "info", "warn", "error", "off"):
        _check.fail("level", "one of trace, debug, info, warn, error, off", level)
    _core.set_log_level(level)


__all__ = _errors.__all__ + [
    "Loader",
    "Producer",
    "SERVER_OPTIONS",
    "Server",
    "query_stats",
    "set_log_level",
    "__version__",
]
