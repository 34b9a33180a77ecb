"""The virtual hosts of one route table, kept up to date as the routes served there change.

`virtual_hosts` computes a table from scratch; this index gives the same virtual hosts (the
same objects where nothing they depend on changed) after items are added or removed, at a
cost proportional to the domains those items reach: a domain's virtual host depends only on
the items served under it or under a domain covering it (`*.example.com`, `*`).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from dragoman.dag.frontends.hostnames import ANY_HOST, covering_domains, covers, listener_host
from dragoman.dag.key_index import KeyIndex
from dragoman.dag.model import VirtualHost
from dragoman.dag.node_groups.groups import host_clusters
from dragoman.dag.node_groups.virtual_hosts import ListenerRoutes, domain_virtual_host

# Orders items as the full build serves them (listener, route, parentRef, attachment).
ItemKey = tuple[Any, ...]
# How many items an update of an empty index adds before they are placed at once.
_BULK = 64


class VirtualHostIndex:
    """One port's (or one HTTPS listener's) virtual hosts, by domain."""

    def __init__(self, port: int, listener_hostnames: Iterable[str | None]) -> None:
        self._port = port
        self._listeners = frozenset(listener_host(h) for h in listener_hostnames)
        self._items: dict[ItemKey, ListenerRoutes] = {}
        # The items served under each domain.
        self._by_domain: KeyIndex[str, ItemKey] = KeyIndex()
        self._domains: set[str] = set(self._listeners)
        self._sorted: list[str] = sorted(self._domains)
        self._hosts: dict[str, VirtualHost | None] = {}
        self._result: tuple[VirtualHost, ...] | None = None
        # Since the result was made: the domains whose host was replaced by another (a
        # result made again puts them in place), and each served domain's place in it (made
        # when first needed; None also when a host came or went, which moves the others).
        self._replaced: set[str] = set()
        self._places: dict[str, int] | None = None
        # How many virtual hosts send requests to each cluster.
        self._clusters: Counter[str] = Counter()
        self._refresh(self._domains)

    def update(
        self, removed: Iterable[ItemKey], added: Mapping[ItemKey, ListenerRoutes]
    ) -> set[str]:
        """Take out the items `removed` names, put in `added`; the domains recomputed."""
        if not self._items and len(added) > _BULK:
            return self._filled(added)
        touched: set[str] = set()
        emptied: list[str] = []  # left by their items, unless items added now serve them
        for key in removed:
            item = self._items.pop(key, None)
            if item is None:
                continue
            for domain in set(item.domains):
                touched.add(domain)
                if self._by_domain.remove(domain, key) and domain not in self._listeners:
                    emptied.append(domain)
        new_domains = []
        for key, item in added.items():
            if key in self._items:
                raise ValueError(f"item {key!r} is already served")
            self._items[key] = item
            for domain in set(item.domains):
                touched.add(domain)
                if self._by_domain.add(domain, key) and domain not in self._domains:
                    self._domains.add(domain)
                    new_domains.append(domain)
        # (A route replaced takes its items out and puts the new ones in: its domains stay,
        # in their places, and their hosts are replaced, not taken out and put back.)
        for domain in emptied:
            if not self._by_domain.count(domain):
                self._domains.discard(domain)
                del self._sorted[bisect.bisect_left(self._sorted, domain)]
                self._set_host(domain, None)
                del self._hosts[domain]
        if len(new_domains) > 64:
            self._sorted = sorted(self._domains)  # many at once (a full build): one sort
        else:
            for domain in new_domains:
                bisect.insort(self._sorted, domain)
        affected = self._affected(touched)
        self._refresh(affected)
        return affected

    def _filled(self, added: Mapping[ItemKey, ListenerRoutes]) -> set[str]:
        """`update` of an empty index with many items (a full build): each domain's items
        found once, in key order, as `virtual_hosts` finds them."""
        keys = sorted(added)
        items = [added[key] for key in keys]
        by_domain: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            for domain in set(item.domains):
                if (positions := by_domain.get(domain)) is None:
                    by_domain[domain] = [index]
                else:
                    positions.append(index)
        self._items = dict(zip(keys, items, strict=True))
        key_of = keys.__getitem__
        self._by_domain = KeyIndex.of(
            {domain: list(map(key_of, positions)) for domain, positions in by_domain.items()}
        )
        domains = self._domains
        domains.update(by_domain)
        self._sorted = sorted(domains)
        port, listeners, hosts = self._port, self._listeners, self._hosts
        for domain in self._sorted:
            covering = [by_domain[d] for d in covering_domains(domain) if d in by_domain]
            own = by_domain.get(domain, [])
            reaching = sorted({*own, *(i for c in covering for i in c)}) if covering else own
            host = domain_virtual_host(
                port, domain, domains, listeners, [items[i] for i in reaching]
            )
            previous = hosts.get(domain)
            if previous is None or previous != host:
                self._set_host(domain, host)
        return set(domains)

    def virtual_hosts(self) -> tuple[VirtualHost, ...]:
        """What `virtual_hosts(port, listener_hostnames, items in key order)` returns."""
        hosts = self._hosts
        if self._result is None:
            self._result = tuple(
                host for domain in self._sorted if (host := hosts[domain]) is not None
            )
            self._places = None
        elif self._replaced:
            # The same hosts in the same places but a few: those few put in a copy (not a
            # step per domain, at 50,000 hosts).
            if self._places is None:
                served = (domain for domain in self._sorted if hosts[domain] is not None)
                self._places = {domain: place for place, domain in enumerate(served)}
            result, places = list(self._result), self._places
            for domain in self._replaced:
                host = hosts[domain]
                assert host is not None  # (replaced by a host, never by None)
                result[places[domain]] = host
            self._result = tuple(result)
        self._replaced.clear()
        return self._result

    @property
    def clusters(self) -> Iterable[str]:
        """Every cluster some virtual host sends requests (or mirrored copies) to."""
        return self._clusters.keys()

    def _affected(self, touched: set[str]) -> set[str]:
        """The touched domains still served, and every served domain a touched wildcard covers
        (its matching domains, its items or its shielding may have changed)."""
        affected = {domain for domain in touched if domain in self._domains}
        wildcards = [d for d in touched if d == ANY_HOST or d.startswith("*.")]
        if ANY_HOST in wildcards:
            return set(self._domains)
        for wildcard in wildcards:
            affected.update(d for d in self._domains if covers(wildcard, d))
        return affected

    def _refresh(self, domains: Iterable[str]) -> None:
        by_domain, items = self._by_domain, self._items
        for domain in domains:
            keys: set[ItemKey] = set()
            for d in (domain, *covering_domains(domain)):
                keys.update(by_domain.keys(d))
            reaching = [items[k] for k in sorted(keys)]
            host = domain_virtual_host(self._port, domain, self._domains, self._listeners, reaching)
            previous = self._hosts.get(domain)
            # The same value keeps the previous object: its serialization is reused by identity.
            if previous is None or previous != host:
                self._set_host(domain, host)

    def _set_host(self, domain: str, host: VirtualHost | None) -> None:
        previous, counts = self._hosts.get(domain), self._clusters
        if previous is not None:
            for name in host_clusters(previous):
                if counts[name] > 1:
                    counts[name] -= 1
                else:
                    del counts[name]
        if host is not None:
            self._clusters.update(host_clusters(host))
        self._hosts[domain] = host
        if previous is not None and host is not None and self._result is not None:
            self._replaced.add(domain)
        else:  # a host came or went (or no result yet): made again
            self._result = None
            self._replaced.clear()
