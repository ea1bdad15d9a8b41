"""ReadOnly: the read-only attributes of Loader, Server and Producer, declared in one line each."""
from __future__ import annotations

import operator
from typing import Any, Callable, Generic, Optional, TypeVar, overload

T = TypeVar("T")


class ReadOnly(Generic[T]):
    """A read-only property whose value is ``convert(obj.<path>)``::

        window = ReadOnly("_core.window", int, "Ring slots of the server.")

    `path` may be dotted (an attribute of the native object, ``_core.window``);
    `convert` gives the public type (``int``, ``bool``, ``list`` for a copy).
    Like a ``property`` without a setter, assigning or deleting it raises
    AttributeError.
    """

    def __init__(self, path: str, convert: Callable[[Any], T], doc: Optional[str] = None) -> None:
        self._get = operator.attrgetter(path)
        self._convert = convert
        self._name = path
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: Optional[type] = None) -> "ReadOnly[T]": ...

    @overload
    def __get__(self, obj: object, owner: Optional[type] = None) -> T: ...

    def __get__(self, obj: Optional[object], owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return self._convert(self._get(obj))

    def __set__(self, obj: object, value: Any) -> None:
        raise AttributeError(f"can't set attribute {self._name!r} of {type(obj).__name__!r} object")

    def __delete__(self, obj: object) -> None:
        raise AttributeError(
            f"can't delete attribute {self._name!r} of {type(obj).__name__!r} object")
