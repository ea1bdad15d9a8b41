"""batchcast.Server: the built-in pipeline, in-process."""
from __future__ import annotations

import json
import os
import time
import warnings
import weakref
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from batchcast import _check, _core, _queues
from batchcast._read_only import ReadOnly

#: The server's option table (server/include/batchcast/server/option_table.h),
#: which docs/options.md is made from.
_OPTIONS: List[_core.ServerOption] = _core.server_options()

#: Keyword arguments of batchcast.Server: every option of the table, the same
#: options as ``batchcast-server serve`` in snake_case.
SERVER_OPTIONS = frozenset(o.name for o in _OPTIONS)

#: Keyword arguments of batchcast.Producer beyond its own parameters: the ring
#: and consumer options of the table (its iterable brings the samples and
#: their order).
PRODUCER_OPTIONS = frozenset(o.name for o in _OPTIONS if o.group in ("ring", "consumers"))


def _options_doc(options: Sequence[_core.ServerOption]) -> str:
    """The options as the "Options" section of a docstring."""
    lines = ["", "    Options (the server's option table, as in docs/options.md):", ""]
    for o in options:
        if o.type == "flag":
            default = f" Default: {o.default == 'true'}."
        else:
            default = f" Default: {o.default}." if o.default else ""
        lines.append(f"        {o.name}: {o.help}.{default}")
    return "\n".join(lines) + "\n"


def _check_options(where: str, options: Dict[str, Any], allowed: frozenset) -> None:
    for key in options:
        if key not in allowed:
            raise TypeError(f"{where}() got an unexpected keyword argument {key!r}")


def _wait(core_server: Any, timeout: Optional[float]) -> bool:
    """Waits in short slices so that Ctrl-C (KeyboardInterrupt) gets through."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = 0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic()))
        if core_server.wait_for(step if step > 0 else 0.001):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


class _Serving:
    """What batchcast.Server and batchcast.Producer share: a native server
    (_core.Server) stopped by close(), the ``with`` block, garbage collection
    or interpreter exit; its endpoint, name and stats."""

    def _attach(self, core: Any) -> None:
        self._core = core
        self._endpoint: str = core.endpoint
        self._name: str = core.name
        self._finalizer = weakref.finalize(self, core.close)

    endpoint = ReadOnly(
        "_endpoint", str,
        "Where Loaders connect (``batchcast.Loader(x.endpoint, ...)``; the name works too).")
    name = ReadOnly("_name", str)

    def stats(self) -> Dict[str, Any]:
        """The stats (as ``batchcast-server stat NAME --json``) as a dict."""
        return json.loads(self._core.stats())

    def close(self) -> None:
        """Stops serving (Loaders get a "server stopped" error). Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Server(_Serving):
    """A batchcast server running in this process (background threads).

    Same options as ``batchcast-server serve`` (snake_case; durations in
    seconds; docs/options.md)::

        with batchcast.Server("/data/imagenet/train", name="imagenet", batch_size=256,
                              size=224, dtype="float16", window=8) as server:
            server.wait()          # serve until the stream ends, close() or Ctrl-C

        with batchcast.Server(synthetic=10000, size=32, name="demo") as server:
            loader = batchcast.Loader(server.endpoint, batch_size=64)

    Args:
        data: what to serve (the ``data`` option below): a path or
            pattern, or a list of tar shard paths; None with
            ``synthetic=COUNT``.
        **options: the server's options (docs/options.md; listed under
            "Options" below): the names of ``batchcast-server serve`` in
            snake_case, durations in seconds, flags True or False, ``mean``
            and ``std`` three numbers. An unknown name is a TypeError; a bad
            value a :class:`batchcast.InvalidArgument`.

    The server stops (consumers get a clear "server stopped" error, the shared
    memory is removed) on :meth:`close`, on leaving the ``with`` block
    (including by KeyboardInterrupt), when the object is garbage-collected, or
    at interpreter exit.

    On a GPU, in a process that trains too: create the Server before any
    other CUDA work (it then starts CUDA with 32 hardware queues,
    CUDA_DEVICE_MAX_CONNECTIONS, unless the variable is set), or the server's
    decode waits behind the training kernels; a RuntimeWarning says so when
    CUDA started earlier with fewer (Note [Hardware queues]).
    """

    def __init__(
        self,
        data: Union[None, str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]] = None,
        **options: Any,
    ) -> None:
        _check_options("Server", options, SERVER_OPTIONS)
        opts = dict(options)
        if isinstance(data, (list, tuple)):
            if not data:
                _check.fail("data", "a non-empty list of shard paths", data)
            opts["data"] = "::".join(_check.text("data", d, path=True) or "" for d in data)
        elif data is not None:
            opts["data"] = _check.text("data", data, path=True)
        self._start(opts, text=False)

    @classmethod
    def from_text(cls, options: Mapping[str, str]) -> "Server":
        """A Server from options written as on the command line: snake_case
        names, every value text that the server reads as ``batchcast-server
        serve`` does (``{"batch_size": "256", "shuffle": "false",
        "mean": "0.5,0.5,0.5"}``; ``data`` is a path or paths joined by
        ``::``). batchcast-launch starts its server so."""
        _check_options("Server.from_text", dict(options), SERVER_OPTIONS)
        server = cls.__new__(cls)
        server._start(dict(options), text=True)
        return server

    def _start(self, opts: Dict[str, Any], text: bool) -> None:
        with _queues.for_server_start(opts.get("device")) as too_few_queues:
            self._attach(_core.Server.start(opts, text))
        if too_few_queues is not None:
            warnings.warn(too_few_queues, RuntimeWarning, stacklevel=3)

    epoch_len = ReadOnly("_core.epoch_len", int)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the server finished: the stream ended (``epochs=``) and
        every consumer left, or a producer error (raised here), or close().
        Returns False when `timeout` seconds passed first."""
        done = _wait(self._core, _check.seconds("timeout", timeout))
        if done:
            self._core.check_status()
        return done

    def __repr__(self) -> str:
        return f"batchcast.Server(name={self._name!r}, endpoint={self._endpoint!r}" + (
            ", closed)" if self.closed else ")"
        )


Server.__doc__ = (Server.__doc__ or "") + _options_doc(_OPTIONS)
