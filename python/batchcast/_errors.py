"""batchcast exceptions (created by the native module, re-exported here).

Every error a batchcast call reports is a :class:`BatchcastError` (a
``RuntimeError``); ``str(e)`` is the library's message and ``e.code`` names the
status code. The subclasses also derive from the closest built-in exception so
that generic handlers work:

===============================  ==========================  =====================================
class                            also a                      raised when
===============================  ==========================  =====================================
``InvalidArgument``              ``ValueError``              bad options / requests
``NotFound``                     ``FileNotFoundError``       no server of that name (no socket file)
``ServerUnavailable``            ``ConnectionError``         the server is gone, was stopped, or
                                                             stopped answering (heartbeat timeout)
``Timeout``                      ``TimeoutError``            ``timeout=`` ran out (DeadlineExceeded)
``ResourceExhausted``            -                           evicted (lag_policy="evict"), too many
  (alias ``Evicted``)                                        unreleased batches, too many consumers
``EndOfStream``                  -                           the server produced all of its epochs
``Cancelled``                    -                           used after close()
``PermissionDenied``             ``PermissionError``         the server refused this consumer's
                                                             CURVE key (tcp://), or a key file is
                                                             readable by other users
``DataLoss``, ``InternalError``  -                           undecodable data; a bug
===============================  ==========================  =====================================
"""
from batchcast._core import (  # noqa: F401
    BatchcastError,
    Cancelled,
    DataLoss,
    EndOfStream,
    InternalError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServerUnavailable,
    Timeout,
)

#: Raised to a consumer that ``lag_policy="evict"`` disconnected (the
#: ResourceExhausted status code); the same class as :class:`ResourceExhausted`.
Evicted = ResourceExhausted

__all__ = [
    "BatchcastError",
    "Cancelled",
    "DataLoss",
    "EndOfStream",
    "Evicted",
    "InternalError",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "ServerUnavailable",
    "Timeout",
]
