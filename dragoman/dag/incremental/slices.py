"""EndpointSlices by the Service they serve, with the problems of each (addresses dropped),
kept up to date slice by slice: a change to one slice costs the slices of its Service, not
a pass over every slice of the store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from dragoman.dag.external_name_policy import Network
from dragoman.dag.model import Problem
from dragoman.dag.upstreams.endpoint_addresses import slice_problems
from dragoman.dag.upstreams.endpoints import slices_by_service
from dragoman.objects import EndpointSlice
from dragoman.store import NamespacedName, Store


class SliceIndex:
    def __init__(
        self, slices: Mapping[NamespacedName, EndpointSlice], allowed: Sequence[Network] = ()
    ) -> None:
        self._allowed = allowed
        # Service (namespace, name) -> slice name -> slice.
        self._by_service: dict[NamespacedName, dict[str, EndpointSlice]] = {}
        # Slice key -> its problems, for the slices that have some.
        self._problems: dict[NamespacedName, list[Problem]] = {}
        for key, endpoint_slice in slices.items():
            self._add(key, endpoint_slice)

    def update(
        self,
        before: Mapping[NamespacedName, EndpointSlice],
        after: Mapping[NamespacedName, EndpointSlice],
        keys: Iterable[NamespacedName],
    ) -> set[NamespacedName]:
        """Take in the slices of `keys` (changed from `before` to `after`); the Services
        whose slices changed."""
        services: set[NamespacedName] = set()
        for key in keys:
            was, now = before.get(key), after.get(key)
            if was is now or was == now:
                continue
            if was is not None:
                self._remove(key, was)
                if was.service_name:
                    services.add((key[0], was.service_name))
            if now is not None:
                self._add(key, now)
                if now.service_name:
                    services.add((key[0], now.service_name))
        return services

    def slices(self, service: NamespacedName) -> list[EndpointSlice]:
        """The Service's slices in name order (as load_assignments takes them)."""
        named = self._by_service.get(service)
        return [named[name] for name in sorted(named)] if named else []

    def problems(self) -> Iterator[Problem]:
        """What slice_problems finds in every slice (an object's problems in its order)."""
        for found in self._problems.values():
            yield from found

    def _add(self, key: NamespacedName, endpoint_slice: EndpointSlice) -> None:
        if endpoint_slice.service_name:
            service = (key[0], endpoint_slice.service_name)
            if (named := self._by_service.get(service)) is None:
                self._by_service[service] = {key[1]: endpoint_slice}
            else:
                named[key[1]] = endpoint_slice
        found = slice_problems((endpoint_slice,), self._allowed)
        if found:
            self._problems[key] = found

    def _remove(self, key: NamespacedName, endpoint_slice: EndpointSlice) -> None:
        if endpoint_slice.service_name:
            service = (key[0], endpoint_slice.service_name)
            named = self._by_service[service]
            del named[key[1]]
            if not named:
                del self._by_service[service]
        self._problems.pop(key, None)


def service_slices(
    store: Store, index: SliceIndex | None
) -> Callable[[NamespacedName], Sequence[EndpointSlice]]:
    """Each Service's EndpointSlices in name order: from the index, or (a build never
    patched) grouped in one pass when first asked."""
    if index is not None:
        return index.slices
    grouped: dict[NamespacedName, list[EndpointSlice]] | None = None

    def slices_of(service: NamespacedName) -> Sequence[EndpointSlice]:
        nonlocal grouped
        if grouped is None:
            grouped = slices_by_service(store)
        return grouped.get(service, ())

    return slices_of
