"""What a directory's files define, kept up to date file by file: how many times each key is
defined (an object defined twice is rare: knowing there is none must not take a set of every
key per load), and which objects a load took out and put in since the previous one (a server
steps its store by them instead of comparing every object)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, overload

from dragoman.objects import KubeObject, ObjectKey


@dataclass(frozen=True, slots=True)
class ObjectDelta:
    """The objects a load took out and put in since the load numbered `since` (the
    `generation` of its LoadResult): the very Python objects, each once. An object of a file
    read again is a new object even when equal to the one it replaces."""

    since: int
    removed: tuple[KubeObject, ...]
    added: tuple[KubeObject, ...]


class Definitions:
    """The definitions of every key, and the objects removed and added since `taken`."""

    def __init__(self) -> None:
        self._counts: dict[ObjectKey, int] = {}
        self.defined = 0  # objects defined, those of a key defined twice included
        self._duplicated = 0  # keys defined more than once
        self._removed: dict[int, KubeObject] = {}  # by id: taken out since the last take
        self._added: dict[int, KubeObject] = {}
        # False before the first take (a first load: every object, which no one steps a
        # store by) and after a take that found a key defined twice: the objects since are
        # not the difference from that load's (whose objects held one definition of the two).
        self._tracked = False

    @property
    def duplicates(self) -> bool:
        """Whether some key is defined more than once (the first definition wins then)."""
        return self._duplicated > 0

    def replaced(self, old: tuple[KubeObject, ...], new: tuple[KubeObject, ...]) -> None:
        """A file's objects `old` replaced by `new` (either may be empty)."""
        if old is new:
            return
        self._count(old, -1)
        self._count(new, 1)
        if not self._tracked:
            return
        for obj in old:
            if self._added.pop(id(obj), None) is None:  # else put and taken out again
                self._removed[id(obj)] = obj
        for obj in new:
            if self._removed.pop(id(obj), None) is None:  # else taken out and put back
                self._added[id(obj)] = obj

    def take(self, since: int) -> ObjectDelta | None:
        """The objects removed and added since the last take (numbered `since`), then none;
        None at the first take, and when some key is defined twice (which definition wins
        depends on the order of every file), now or at the last take."""
        delta = None
        if self._tracked and not self.duplicates:
            delta = ObjectDelta(since, tuple(self._removed.values()), tuple(self._added.values()))
        self._removed.clear()
        self._added.clear()
        self._tracked = not self.duplicates
        return delta

    def _count(self, objects: tuple[KubeObject, ...], step: int) -> None:
        self.defined += step * len(objects)
        counts = self._counts
        for obj in objects:
            key = obj.key
            count = counts.get(key, 0) + step
            if step > 0 and count == 2:
                self._duplicated += 1
            elif step < 0 and count == 1:
                self._duplicated -= 1
            if count:
                counts[key] = count
            else:
                del counts[key]


_objects_of = attrgetter("objects")


class ObjectsOf(Sequence[KubeObject]):
    """Every object of the records (anything with an `objects` tuple), in order: iterated
    from the records, and made one tuple only when indexed or compared. A load's result
    holds this: a new tuple of every object touches each of them (their reference counts,
    scattered in memory), about 17 ms at 50,000 files, and a server stepping its store by
    the load's delta never reads it."""

    __slots__ = ("_count", "_records", "_tuple")

    def __init__(self, records: tuple[Any, ...], count: int) -> None:
        """`count`: how many objects the records hold, known to the caller."""
        self._records = records
        self._count = count
        self._tuple: tuple[KubeObject, ...] | None = None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[KubeObject]:
        if self._tuple is not None:
            return iter(self._tuple)
        return itertools.chain.from_iterable(map(_objects_of, self._records))

    @overload
    def __getitem__(self, index: int) -> KubeObject: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[KubeObject, ...]: ...
    def __getitem__(self, index: int | slice) -> KubeObject | tuple[KubeObject, ...]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ObjectsOf):
            return self._all() == other._all()
        if isinstance(other, tuple):
            return self._all() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by content, as a list

    def __repr__(self) -> str:
        return f"ObjectsOf({self._all()!r})"

    def _all(self) -> tuple[KubeObject, ...]:
        if self._tuple is None:
            self._tuple = tuple(itertools.chain.from_iterable(map(_objects_of, self._records)))
        return self._tuple
