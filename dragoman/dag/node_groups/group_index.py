"""What one group of Envoys receives (see groups.py), kept up to date as the routes
served change: each route table is a VirtualHostIndex, so a change to one route costs the
virtual hosts it reaches, not the whole table; a TCP, TLS or UDP listener is made again
when a route served there changes."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dragoman.dag.frontends.attachment import Attachment
from dragoman.dag.frontends.listeners import L4_PROTOCOLS, GatewayVerdict, ListenerVerdict
from dragoman.dag.model import Listener, NodeGroup, VirtualHost
from dragoman.dag.node_groups.groups import (
    ServedRoutes,
    assembled_group,
    l4_clusters,
    listeners_by_port,
)
from dragoman.dag.node_groups.l4_listeners import ServedL4Route, l4_listener
from dragoman.dag.node_groups.virtual_host_index import ItemKey, VirtualHostIndex
from dragoman.dag.node_groups.virtual_hosts import ListenerRoutes, Scheme

# A served item: (route key, parentRef position, attachment position), the build's order.
ServedKey = tuple[Any, ...]
_TableKey = tuple[Any, ...]


class NodeGroupIndex:
    """The node group of `gateways`, given its served routes item by item."""

    def __init__(self, name: str, gateways: Sequence[GatewayVerdict]) -> None:
        self._name = name
        self._ports = listeners_by_port(gateways)
        self._tables: dict[_TableKey, VirtualHostIndex] = {}
        # (Gateway namespace, name, listener) -> where its routes go: (table, position of the
        # listener among the table's, scheme, listener hostname).
        self._routing: dict[tuple[str, str, str], list[tuple[_TableKey, int, Scheme, Any]]] = {}
        # TCP, TLS and UDP listeners (no virtual hosts): the routes served there.
        self._l4: dict[tuple[str, str, str], dict[ServedKey, ServedL4Route]] = {}
        for (port, _), verdicts in self._ports.items():
            hostnames = [v.listener.hostname for v in verdicts]
            if verdicts[0].listener.protocol in L4_PROTOCOLS:
                for verdict in verdicts:
                    self._l4[(verdict.gateway.namespace, verdict.gateway.name, verdict.name)] = {}
                continue
            table: _TableKey
            if verdicts[0].listener.protocol == "HTTPS":
                for verdict in verdicts:
                    table = ("https", port, verdict.gateway, verdict.name)
                    self._tables[table] = VirtualHostIndex(port, hostnames)
                    self._route(verdict, table, 0, "https")
            else:
                table = ("http", port)
                self._tables[table] = VirtualHostIndex(port, hostnames)
                for position, verdict in enumerate(verdicts):
                    self._route(verdict, table, position, "http")
        # Where an item is placed is not kept: its attachment says (see _placed).
        self._group: NodeGroup | None = None
        self._clusters: tuple[str, ...] = ()

    def _route(
        self, verdict: ListenerVerdict, table: _TableKey, position: int, scheme: Scheme
    ) -> None:
        key = (verdict.gateway.namespace, verdict.gateway.name, verdict.name)
        where = (table, position, scheme, verdict.listener.hostname)
        self._routing.setdefault(key, []).append(where)

    def rejudged(self, gateways: Sequence[GatewayVerdict]) -> None:
        """The same listeners judged anew (new certificates): the routes stay where they are."""
        ports = listeners_by_port(gateways)
        if [(p, [v.name for v in vs]) for p, vs in ports.items()] != [
            (p, [v.name for v in vs]) for p, vs in self._ports.items()
        ]:
            raise ValueError("rejudged listeners must keep their ports and names")
        self._ports = ports
        self._group = None

    def update(
        self,
        removed: Mapping[ServedKey, ServedRoutes | ServedL4Route],
        added: Mapping[ServedKey, ServedRoutes | ServedL4Route],
    ) -> None:
        """Take out the items `removed` (as they were added), put in `added`."""
        gone: dict[_TableKey, list[ItemKey]] = {}
        l4 = self._l4
        for served_key, item in removed.items():
            a = item.attachment
            if isinstance(item, ServedL4Route):
                served = l4.get((a.gateway.namespace, a.gateway.name, a.listener))
                if served is not None and served.pop(served_key, None) is not None:
                    self._group = None
                continue
            for table, item_key, _, _ in self._placed(served_key, a):
                gone.setdefault(table, []).append(item_key)
        new: dict[_TableKey, dict[ItemKey, ListenerRoutes]] = {}
        for served_key, item in added.items():
            a = item.attachment
            if isinstance(item, ServedL4Route):
                listener = (a.gateway.namespace, a.gateway.name, a.listener)
                if (served := l4.get(listener)) is not None:
                    served[served_key] = item
                    self._group = None
                continue
            for table, item_key, scheme, hostname in self._placed(served_key, a):
                new.setdefault(table, {})[item_key] = ListenerRoutes(
                    listener_hostname=hostname,
                    scheme=scheme,
                    domains=a.domains,
                    route_hostnames=item.route_hostnames,
                    routes=item.routes,
                )
        for table in gone.keys() | new.keys():
            self._tables[table].update(gone.get(table, ()), new.get(table, {}))
            self._group = None

    def _placed(
        self, served_key: ServedKey, a: Attachment
    ) -> Iterator[tuple[_TableKey, ItemKey, Scheme, Any]]:
        """Where an item attached by `a` goes: (table, its key there, scheme, listener
        hostname) for each route table of its listener. The routing never changes (rejudged
        keeps the listeners), so an item is found where it was placed: nothing per item kept."""
        for table, position, scheme, hostname in self._routing.get(
            (a.gateway.namespace, a.gateway.name, a.listener), ()
        ):
            yield table, (position, *served_key), scheme, hostname

    def group(self) -> NodeGroup:
        if self._group is None:
            tables = self._tables

            def http_hosts(port: int, _: Sequence[ListenerVerdict]) -> tuple[VirtualHost, ...]:
                return tables[("http", port)].virtual_hosts()

            def https_hosts(
                port: int, _: Sequence[ListenerVerdict], verdict: ListenerVerdict
            ) -> tuple[VirtualHost, ...]:
                return tables[("https", port, verdict.gateway, verdict.name)].virtual_hosts()

            def l4(port: int, verdicts: Sequence[ListenerVerdict]) -> Listener | None:
                served = self._l4
                by_listener = {
                    listener: [served[listener][k] for k in sorted(served[listener])]
                    for v in verdicts
                    if (listener := (v.gateway.namespace, v.gateway.name, v.name)) in served
                }
                return l4_listener(port, verdicts, by_listener)

            group = assembled_group(self._name, self._ports, http_hosts, https_hosts, l4)
            names = l4_clusters(group.listeners)
            for table in tables.values():
                names.update(table.clusters)
            self._clusters = sorted_names(names, self._clusters)
            clusters = self._clusters  # the same object when alike: translation reuses it
            self._group = dataclasses.replace(group, clusters=clusters)
        return self._group


# Up to this many names added or removed are merged into the previous sorted names.
_MERGED_UP_TO = 256


def sorted_names(names: set[str], previous: tuple[str, ...]) -> tuple[str, ...]:
    """`tuple(sorted(names))`: `previous` itself when it holds the same names, else made from
    it when few names differ (a change must not sort every cluster's name again)."""
    if abs(len(names) - len(previous)) > _MERGED_UP_TO or not previous:
        return tuple(sorted(names))  # (a first build)
    held = set(previous)
    if held == names:
        return previous
    added, removed = names - held, held - names
    if len(added) + len(removed) > _MERGED_UP_TO:
        return tuple(sorted(names))
    merged = [name for name in previous if name not in removed] if removed else list(previous)
    for name in added:
        bisect.insort(merged, name)
    return tuple(merged)
