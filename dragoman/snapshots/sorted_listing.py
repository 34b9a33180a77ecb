"""A TypeSnapshot kept up to date name by name: a change to a few of its resources costs those.

`TypeSnapshot.of` sorts every resource and lists every name and digest again to hash the
version. A type of thousands of resources of which one changes at a time (the scopes of
route tables per hostname) keeps its names sorted here, beside the line each adds to the
version's hash: a change puts each changed name in place by bisection, and the version
hashes the kept lines, the very bytes `TypeSnapshot.of` hashes. The same resources get the
same snapshot (order and version) either way.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dragoman.snapshots.resources import Resource, TypeSnapshot, version_line, version_of_lines


@dataclass(frozen=True, slots=True)
class SortedListing:
    """A TypeSnapshot, its names in order, and the version's line of each."""

    snapshot: TypeSnapshot
    # Never changed once made: a listing may be shared by several node groups.
    names: list[str]
    lines: list[bytes]  # "name\0digest\n" of each of `names`, in their order

    @classmethod
    def of(cls, resources: Iterable[Resource]) -> SortedListing:
        snapshot = TypeSnapshot.of(resources)
        held = snapshot.resources.values()
        return cls(snapshot, list(snapshot.resources), [version_line(r) for r in held])

    def changed(self, changes: Mapping[str, Resource | None]) -> SortedListing:
        """This listing with each of `changes` put in (a Resource, in place of the one of its
        name if any) or taken out (None): itself when nothing differs. The snapshot made
        says, in `derived`, the names that differ from this one's (added and removed ones
        included)."""
        held = self.snapshot.resources
        differing = {n: r for n, r in changes.items() if held.get(n) is not r}
        if not differing:
            return self
        names, lines, resources = list(self.names), list(self.lines), dict(held)
        moved = False  # a name came or went: the mapping is made again in name order
        for name, resource in differing.items():
            index = bisect_left(names, name)
            present = index < len(names) and names[index] == name
            if resource is None:  # present: `differing` keeps no absent name's None
                del names[index], lines[index], resources[name]
                moved = True
            elif present:
                lines[index] = version_line(resource)
                resources[name] = resource
            else:
                names.insert(index, name)
                lines.insert(index, version_line(resource))
                resources[name] = resource
                moved = True
        if moved:
            resources = dict(zip(names, map(resources.__getitem__, names), strict=True))
        snapshot = TypeSnapshot(resources=resources, version=version_of_lines(lines))
        # Made here, before anyone reads it.
        object.__setattr__(snapshot, "derived", (self.snapshot.version, frozenset(differing)))
        return SortedListing(snapshot, names, lines)
