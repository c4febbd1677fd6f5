"""Small value classes without `dataclasses`: its generated code costs about 0.8 ms a class at
start-up (10 ms on the `list` path), which `list --json` and cron jobs pay on every call."""

from __future__ import annotations

from typing import Any


class Value:
    """Field-wise `==`, hash and repr over `__slots__`, as a dataclass would give them."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = type(self).__slots__
        return tuple(n for n in names if n != "__dict__")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._names())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Value)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._names())
        return f"{type(self).__name__}({inner})"
