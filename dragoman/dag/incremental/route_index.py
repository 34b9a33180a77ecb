"""Every route's entry, and the indexes from what a change touches to the routes it reaches:
the Services each route read, the namespaces of the ReferenceGrants it asked, the external
names it forwards to, the listeners it attached to; with the routes in each kind's key order
and how many routes each Gateway listener accepted."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import chain

from dragoman.dag.incremental.entries import L4_KINDS, ROUTE_FIELDS, RouteEntry, sort_key
from dragoman.dag.key_index import KeyIndex
from dragoman.dag.model import Problem
from dragoman.objects import ObjectKey
from dragoman.store import NamespacedName

# A Gateway (or ListenerSet) and the name of one of its listeners.
ListenerKey = tuple[ObjectKey, str]


class RouteIndex:
    """The entries of a build's routes, and what finds them.

    `indexed` False (a build never patched): only what the build itself reads is kept, not
    what a later change would look up (what each route read)."""

    def __init__(self, indexed: bool = True) -> None:
        self.indexed = indexed
        self.entries: dict[ObjectKey, RouteEntry] = {}
        # Route keys of each kind, in key order (unordered within a bulk update).
        self._keys: dict[str, list[ObjectKey]] = {kind: [] for kind in ROUTE_FIELDS}
        self._bulk = False
        # Routes by the Service they read, namespace of the ReferenceGrants they asked,
        # external name they forward to (attached or not).
        self._readers: KeyIndex[NamespacedName, ObjectKey] = KeyIndex()
        self._readers_of_all: set[ObjectKey] = set()
        self._grant_readers: KeyIndex[str, ObjectKey] = KeyIndex()
        self._hostname_readers: KeyIndex[str, ObjectKey] = KeyIndex()
        # Per (Gateway, listener): the route kinds attached and the routes, before conflicts;
        # of TCPRoutes, TLSRoutes and UDPRoutes apart (their conflicts are decided apart).
        self._listener_kinds: dict[ListenerKey, Counter[str]] = {}
        self._listener_routes: KeyIndex[ListenerKey, ObjectKey] = KeyIndex()
        self._l4_listener_routes: KeyIndex[ListenerKey, ObjectKey] = KeyIndex()
        # Routes whose parents kind conflicts changed.
        self.conflicted: set[ObjectKey] = set()
        # The routes with problems in key order, and their problems: one change among
        # thousands of routes with some does not sort or look up every one again.
        self._problem_keys: list[ObjectKey] = []
        self._problems: list[tuple[Problem, ...]] = []
        # Routes attached somewhere that forward to external names (for the DNS check).
        self.with_hostnames: set[ObjectKey] = set()
        # Per Gateway and listener: how many routes it accepted (after conflicts).
        self._accepted: dict[ObjectKey, dict[str, int]] = {}

    def begin_bulk(self) -> None:
        """Many routes follow: their keys are sorted once at end_bulk, not placed one by one."""
        self._bulk = True

    def end_bulk(self) -> None:
        if not self._bulk:
            return
        by_kind: dict[str, list[ObjectKey]] = {kind: [] for kind in self._keys}
        for key in self.entries:
            by_kind[key.kind].append(key)
        for keys in by_kind.values():
            keys.sort(key=sort_key)
        self._keys = by_kind
        entries = self.entries
        self._problem_keys = sorted(key for key, entry in entries.items() if entry.problems)
        self._problems = [entries[key].problems for key in self._problem_keys]
        self._bulk = False

    def kinds(self) -> Iterable[str]:
        """The route kinds, in the order of their statuses."""
        return self._keys.keys()

    def keys(self, kind: str) -> list[ObjectKey]:
        """The routes of `kind`, in key order (outside a bulk update)."""
        return self._keys[kind]

    def problems(self) -> Iterable[Problem]:
        """Every route's problems, route by route in key order (outside a bulk update)."""
        return chain.from_iterable(self._problems)

    @property
    def accepted(self) -> Mapping[ObjectKey, Mapping[str, int]]:
        """Per Gateway and listener, how many routes it accepted."""
        return self._accepted

    def readers(self, service: NamespacedName) -> Iterable[ObjectKey]:
        """The routes that read the Service (routes that read every Service apart)."""
        return self._readers.keys(service)

    @property
    def readers_of_all(self) -> Iterable[ObjectKey]:
        """The routes that read every Service."""
        return self._readers_of_all

    def grant_readers(self, namespace: str) -> Iterable[ObjectKey]:
        """The routes that asked ReferenceGrants of `namespace` a question."""
        return self._grant_readers.keys(namespace)

    def hostname_readers(self, name: str) -> Iterable[ObjectKey]:
        """The routes that forward to the external name (attached or not)."""
        return self._hostname_readers.keys(name)

    def shared_listeners(self) -> tuple[list[Iterable[ObjectKey]], list[Iterable[ObjectKey]]]:
        """The routes of each listener that HTTPRoutes and GRPCRoutes share, and of each one
        several TCPRoutes, TLSRoutes or UDPRoutes share: where conflicts are decided."""
        kinds = self._listener_kinds
        http = [keys for at, keys in self._listener_routes.shared() if len(kinds[at]) > 1]
        l4 = [keys for _, keys in self._l4_listener_routes.shared()]
        return http, l4

    def add(self, entry: RouteEntry) -> None:
        key = entry.key
        self.entries[key] = entry
        if not self._bulk:
            bisect.insort(self._keys[key.kind], key, key=sort_key)
        if entry.parents != entry.attached or entry.conflicts:
            self.conflicted.add(key)
        if entry.problems and not self._bulk:
            at = bisect.bisect_left(self._problem_keys, key)
            self._problem_keys.insert(at, key)
            self._problems.insert(at, entry.problems)
        hostnames = entry.names.hostnames
        if hostnames and any(parent.attachments for parent in entry.parents):
            self.with_hostnames.add(key)
        if self.indexed:
            self._add_reads(entry)
        self._add_listeners(entry)
        for gateway_key, listener_name in entry.accepted_on():
            if (gateway := self._accepted.get(gateway_key)) is None:
                gateway = self._accepted[gateway_key] = {}
            gateway[listener_name] = gateway.get(listener_name, 0) + 1

    def restate(self, entry: RouteEntry) -> None:
        """Replace the entry of its route by `entry`, which differs only in its status."""
        self.entries[entry.key] = entry

    def remove(self, entry: RouteEntry) -> None:
        key = entry.key
        if not self._bulk:
            keys = self._keys[key.kind]
            del keys[bisect.bisect_left(keys, sort_key(key), key=sort_key)]
        del self.entries[key]
        self.conflicted.discard(key)
        if entry.problems and not self._bulk:
            at = bisect.bisect_left(self._problem_keys, key)
            del self._problem_keys[at], self._problems[at]
        self.with_hostnames.discard(key)
        if self.indexed:
            self._remove_reads(entry)
        self._remove_listeners(entry)
        for gateway_key, listener_name in entry.accepted_on():
            gateway = self._accepted[gateway_key]
            if gateway[listener_name] > 1:
                gateway[listener_name] -= 1
            else:
                del gateway[listener_name]

    def _add_reads(self, entry: RouteEntry) -> None:
        key = entry.key
        for name in entry.names.hostnames:
            self._hostname_readers.add(name, key)
        if entry.services_read is None:
            self._readers_of_all.add(key)
        else:
            readers = self._readers
            for service in entry.services_read:
                readers.add(service, key)
        for _, target in entry.grant_questions:
            self._grant_readers.add(target.namespace, key)

    def _remove_reads(self, entry: RouteEntry) -> None:
        key = entry.key
        for name in entry.names.hostnames:
            self._hostname_readers.remove(name, key)
        self._readers_of_all.discard(key)
        for service in entry.services_read or ():
            self._readers.remove(service, key)
        for _, target in entry.grant_questions:
            self._grant_readers.remove(target.namespace, key)

    def _add_listeners(self, entry: RouteEntry) -> None:
        key = entry.key
        l4 = key.kind in L4_KINDS
        for parent in entry.attached:
            for attachment in parent.attachments:
                listener = (attachment.gateway, attachment.listener)
                if l4:
                    self._l4_listener_routes.add(listener, key)
                    continue
                # No setdefault(k, Counter()): ten thousand routes would each make one.
                if (kinds := self._listener_kinds.get(listener)) is None:
                    kinds = self._listener_kinds[listener] = Counter()
                kinds[key.kind] += 1
                self._listener_routes.add(listener, key)

    def _remove_listeners(self, entry: RouteEntry) -> None:
        key = entry.key
        l4 = key.kind in L4_KINDS
        for parent in entry.attached:
            for attachment in parent.attachments:
                listener = (attachment.gateway, attachment.listener)
                if l4:
                    self._l4_listener_routes.remove(listener, key)
                    continue
                kinds = self._listener_kinds[listener]
                kinds[key.kind] -= 1
                if not kinds[key.kind]:
                    del kinds[key.kind]
                self._listener_routes.remove(listener, key)
