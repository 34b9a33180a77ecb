"""What one group of Envoys receives (see groups.py), kept up to date as the routes
served change: each route table is a VirtualHostIndex, so a change to one route costs the
virtual hosts it reaches, not the whole table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dragoman.dag.frontends.listeners import L4_PROTOCOLS, GatewayVerdict, ListenerVerdict
from dragoman.dag.model import Listener, NodeGroup, VirtualHost
from dragoman.dag.node_groups.groups import (
    ServedRoutes,
    assembled_group,
    l4_clusters,
    listeners_by_port,
)
from dragoman.dag.node_groups.l4_listeners import l4_listener
from dragoman.dag.node_groups.virtual_host_index import ItemKey, VirtualHostIndex
from dragoman.dag.node_groups.virtual_hosts import ListenerRoutes

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
        self._routing: dict[tuple[str, str, str], list[tuple[_TableKey, int, str, Any]]] = {}
        for (port, _), verdicts in self._ports.items():
            hostnames = [v.listener.hostname for v in verdicts]
            if verdicts[0].listener.protocol in L4_PROTOCOLS:
                continue  # TCP, TLS and UDP listeners: no virtual hosts
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
        self._placed: dict[ServedKey, list[tuple[_TableKey, ItemKey]]] = {}
        self._group: NodeGroup | None = None
        self._clusters: tuple[str, ...] = ()

    def _route(
        self, verdict: ListenerVerdict, table: _TableKey, position: int, scheme: str
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

    def update(self, removed: Iterable[ServedKey], added: Mapping[ServedKey, ServedRoutes]) -> None:
        gone: dict[_TableKey, list[ItemKey]] = {}
        for served_key in removed:
            for table, item_key in self._placed.pop(served_key, ()):
                gone.setdefault(table, []).append(item_key)
        new: dict[_TableKey, dict[ItemKey, ListenerRoutes]] = {}
        for served_key, item in added.items():
            a = item.attachment
            placed = []
            for table, position, scheme, hostname in self._routing.get(
                (a.gateway.namespace, a.gateway.name, a.listener), ()
            ):
                item_key = (position, *served_key)
                new.setdefault(table, {})[item_key] = ListenerRoutes(
                    listener_hostname=hostname,
                    scheme=scheme,
                    domains=a.domains,
                    route_hostnames=item.route_hostnames,
                    routes=item.routes,
                )
                placed.append((table, item_key))
            if placed:
                self._placed[served_key] = placed
        for table in gone.keys() | new.keys():
            self._tables[table].update(gone.get(table, ()), new.get(table, {}))
            self._group = None

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
                # Only stores without TCP, TLS and UDP routes are kept up to date this way.
                return l4_listener(port, verdicts, {})

            group = assembled_group(self._name, self._ports, http_hosts, https_hosts, l4)
            names = l4_clusters(group.listeners)
            for table in tables.values():
                names.update(table.clusters)
            clusters = tuple(sorted(names))
            if self._clusters == clusters:
                clusters = self._clusters  # the same object: translation reuses what it made
            self._clusters = clusters
            self._group = dataclasses.replace(group, clusters=clusters)
        return self._group
