"""Checks of the Python API's arguments.

A wrong value or a wrong type is a :class:`batchcast.InvalidArgument` (also a
``ValueError``) whose message names the parameter and says what it must be,
as the server options' checks do (server/include/batchcast/server/option_table.h);
never a bare ``TypeError`` from deep inside, nor a pybind11 cast error.
"""
from __future__ import annotations

import numbers
import os
from typing import Any, Literal, NoReturn, Optional, overload

from batchcast._errors import InvalidArgument


def fail(name: str, expected: str, value: Any) -> NoReturn:
    refuse(f"{name} must be {expected}, got {type(value).__name__} {value!r}")


def refuse(message: str) -> NoReturn:
    """An InvalidArgument saying `message` (an argument that fits its type
    but not the situation)."""
    err = InvalidArgument(message)
    err.code = "InvalidArgument"
    raise err


@overload
def integer(name: str, value: Any, minimum: int = ..., maximum: Optional[int] = ...,
            optional: Literal[False] = ...) -> int: ...


@overload
def integer(name: str, value: Any, minimum: int = ..., maximum: Optional[int] = ...,
            optional: bool = ...) -> Optional[int]: ...


def integer(name: str, value: Any, minimum: int = 1, maximum: Optional[int] = None,
            optional: bool = False) -> Optional[int]:
    """An int (not a bool) in [minimum, maximum]; None when optional."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        fail(name, "an integer" + (" or None" if optional else ""), value)
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
        fail(name, f"an integer {bound}" + (" or None" if optional else ""), value)
    return value


@overload
def boolean(name: str, value: Any, optional: Literal[False] = ...) -> bool: ...


@overload
def boolean(name: str, value: Any, optional: bool = ...) -> Optional[bool]: ...


def boolean(name: str, value: Any, optional: bool = False) -> Optional[bool]:
    """True or False (numpy's bool too); None when optional."""
    if value is None and optional:
        return None
    if not (isinstance(value, bool) or type(value).__name__ == "bool_"):
        fail(name, "True or False" + (" or None" if optional else ""), value)
    return bool(value)


def seconds(name: str, value: Any, positive: bool = False,
            optional: bool = True) -> Optional[float]:
    """A number of seconds (not a bool), >= 0 (or > 0); None when optional."""
    if value is None and optional:
        return None
    what = "a positive number of seconds" if positive else "a number of seconds (>= 0)"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(name, what + (" or None" if optional else ""), value)
    v = float(value)
    if v != v or v < 0 or (positive and v == 0) or v == float("inf"):
        fail(name, what + (" or None" if optional else ""), value)
    return v


@overload
def text(name: str, value: Any, optional: Literal[False] = ..., path: bool = ...) -> str: ...


@overload
def text(name: str, value: Any, optional: bool = ..., path: bool = ...) -> Optional[str]: ...


def text(name: str, value: Any, optional: bool = False, path: bool = False) -> Optional[str]:
    """A str (or, with path=True, an os.PathLike); None when optional."""
    if value is None and optional:
        return None
    if path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    what = "a string or a path" if path else "a string"
    if not isinstance(value, str):
        fail(name, what + (" or None" if optional else ""), value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: bytes os.fsdecode could not decode
        fail(name, what + " of valid UTF-8 text", value)
    return value
