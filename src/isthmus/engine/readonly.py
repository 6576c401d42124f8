"""Read-only windows on the engine's queues and lists, as policies see them (isthmus.engine.view).

Apart from the view: view.py is compiled with mypyc (setup.py), and these extend ABCs
(Sequence, Mapping, Iterable); a class compiled as a native class that extends an ABC shares
the ABC's isinstance cache (a list would pass isinstance(x, ReadOnlyList) once it passed
isinstance(x, Sequence)), so this module stays pure Python.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, overload

from sortedcontainers import SortedList

if TYPE_CHECKING:
    from isthmus.engine.state import JobEntry


class ReadOnlyList(Sequence["tuple[float, int]"]):
    """A read-only window on a list the engine keeps (iteration at list speed)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[tuple[float, int]]) -> None:
        self._items = items

    @overload
    def __getitem__(self, i: int) -> tuple[float, int]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[float, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[float, int] | Sequence[tuple[float, int]]:
        if isinstance(i, slice):
            return tuple(self._items[i])
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[float, int]]:
        return iter(self._items)


class BucketsView(Mapping[int, Mapping[int, "JobEntry"]]):
    """size -> {job id: entry} of one queue, read-only at both levels."""

    __slots__ = ("_d",)

    def __init__(self, d: Mapping[int, Mapping[int, JobEntry]]) -> None:
        self._d = d

    def __getitem__(self, size: int) -> Mapping[int, JobEntry]:
        return MappingProxyType(self._d[size])

    def __iter__(self) -> Iterator[int]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)


_BY_SEQ = itemgetter(1)


class SortedGroup(Iterable["JobEntry"]):
    """One size group of the runtime index, iterated in order (read-only)."""

    __slots__ = ("_entries", "_items")

    def __init__(self, items: list[tuple[float, int, int]] | SortedList, entries: Mapping[int, JobEntry]) -> None:
        self._items = items
        self._entries = entries

    def __iter__(self) -> Iterator[JobEntry]:
        entries = self._entries
        return (entries[item[2]] for item in self._items)

    def upto(self, limit: float) -> list[tuple[float, int, int]]:
        """(runtime, queue sequence, job id) of the jobs whose runtime is at most `limit` (a NaN
        runtime counts as infinite), in queue order: found by bisection and sorted without
        visiting the group's longer jobs."""
        items = self._items
        bound = (limit, math.inf, math.inf)
        cut = items.bisect_right(bound) if isinstance(items, SortedList) else bisect.bisect_right(items, bound)
        head = list(items[:cut])
        head.sort(key=_BY_SEQ)
        return head


class SortedBucketsView(Mapping[int, SortedGroup]):
    """size -> jobs of that size in runtime order, read-only."""

    __slots__ = ("_d", "_entries")

    def __init__(
        self, d: Mapping[int, list[tuple[float, int, int]] | SortedList], entries: Mapping[int, JobEntry]
    ) -> None:
        self._d = d
        self._entries = entries

    def __getitem__(self, size: int) -> SortedGroup:
        return SortedGroup(self._d[size], self._entries)

    def __iter__(self) -> Iterator[int]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)
