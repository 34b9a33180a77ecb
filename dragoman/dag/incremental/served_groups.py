"""What each group of Envoys receives (one group per Gateway, and the all-gateways group),
from the routes' served items: kept in node group indexes that rebuild only what changed
items reach, or, for a build never patched, made once from every route."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dragoman.dag.frontends.listeners import Frontends
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.model import ALL_GATEWAYS, NodeGroup, Problem
from dragoman.dag.node_groups.group_index import NodeGroupIndex, ServedKey
from dragoman.dag.node_groups.groups import ServedRoutes, node_group, shadowed_listeners
from dragoman.dag.node_groups.l4_listeners import ServedL4Route
from dragoman.objects import ObjectKey
from dragoman.store import NamespacedName

ServedItem = ServedRoutes | ServedL4Route
# A Gateway and a port one of its listeners shares with another Gateway's.
ShadowedKey = tuple[ObjectKey, int]


@dataclass(frozen=True, slots=True)
class ServedGroups:
    groups: dict[str, NodeGroup]  # by name, the all-gateways group first
    referenced: Iterable[str]  # the names of the clusters any group references
    # Listeners the all-gateways group cannot serve (they share a port and hostname).
    shadowed: Mapping[ShadowedKey, Problem]


def unscoped_by_gateway(served: ServedGroups) -> dict[ObjectKey, list[Problem]]:
    """Why listeners keep one route table though their Gateway asks for one per hostname,
    by Gateway (a ListenerSet's listeners on their Gateway): each once, from every group."""
    found: dict[ObjectKey, dict[Problem, None]] = {}
    for group in served.groups.values():
        for problem in group.unscoped:  # nearly always none
            found.setdefault(problem.object, {})[problem] = None
    return {key: list(problems) for key, problems in found.items()}


def group_name(gateway: ObjectKey) -> str:
    return f"{gateway.namespace}/{gateway.name}"


def _gateway_of(group: str) -> NamespacedName:
    namespace, name = group.split("/", 1)
    return namespace, name


class NodeGroups:
    """The node groups of one set of judged Gateways, as routes come and go."""

    def __init__(self, judged: Frontends, indexed: bool = True) -> None:
        self._judged, self._indexed = judged, indexed
        gateways = judged.ordered()
        self._indexes: dict[str, NodeGroupIndex] = {
            group_name(verdict.gateway.key): NodeGroupIndex(
                group_name(verdict.gateway.key), judged.with_children(verdict)
            )
            for verdict in (gateways if indexed else ())
        }
        # One Gateway: every Envoy gets the same configuration; built (and serialized) once.
        # (Unless a ListenerSet's routes are served with no Gateway: see served.)
        self._single = len(gateways) == 1
        # Gateways sharing a port: the all-gateways group can serve only one listener per
        # port and hostname, so it may reference fewer clusters than some Gateway's group.
        self._every_shadowed: dict[ShadowedKey, Problem] = {}
        if not self._single or judged.listener_sets:
            every = [item for verdict in gateways for item in judged.with_children(verdict)]
            if indexed:
                self._indexes[ALL_GATEWAYS] = NodeGroupIndex(ALL_GATEWAYS, every)
            self._every_shadowed = shadowed_listeners(every)
        # The one Gateway's group, and its copy named for every Gateway.
        self._copied: tuple[NodeGroup, NodeGroup] | None = None

    def rejudged(self, judged: Frontends) -> None:
        """The same Gateways judged anew (their listeners' certificates changed)."""
        self._judged = judged
        for name, index in self._indexes.items():
            index.rejudged(
                [item for v in judged.ordered() for item in judged.with_children(v)]
                if name == ALL_GATEWAYS
                else judged.with_children(judged.gateways[_gateway_of(name)])
            )

    def update(
        self, removed: Mapping[ServedKey, ServedItem], added: Mapping[ServedKey, ServedItem]
    ) -> None:
        for index in self._indexes.values():
            index.update(removed, added)

    def served(self, routes: RouteIndex) -> ServedGroups:
        """What each group receives now."""
        if not self._indexed:
            return self._made(routes)
        groups: dict[str, NodeGroup] = {}
        for name, index in self._indexes.items():
            if name != ALL_GATEWAYS:
                groups[name] = index.group()
        single = self._single and not self._served_elsewhere(routes)
        if single:
            only = next(iter(groups.values()))
            if self._copied is None or self._copied[0] is not only:
                self._copied = only, dataclasses.replace(only, name=ALL_GATEWAYS)
            everyone = self._copied[1]
            referenced: Iterable[str] = everyone.clusters
        else:
            everyone = self._indexes[ALL_GATEWAYS].group()
            referenced = sorted(
                {name for group in (everyone, *groups.values()) for name in group.clusters}
            )
        shadowed = {} if single else self._every_shadowed
        return ServedGroups({ALL_GATEWAYS: everyone, **groups}, referenced, shadowed)

    def _made(self, routes: RouteIndex) -> ServedGroups:
        """served() without node group indexes: each group made from the routes served."""
        judged, entries = self._judged, routes.entries
        served: list[ServedRoutes] = []
        served_l4: list[ServedL4Route] = []
        for kind in sorted(routes.kinds()):  # the routes in ObjectKey order
            for key in routes.keys(kind):
                for _, item in entries[key].served():
                    if isinstance(item, ServedL4Route):
                        served_l4.append(item)
                    else:
                        served.append(item)
        # Routes on a ListenerSet's listeners are served with its Gateway's.
        by_gateway: dict[ObjectKey, list[ServedRoutes]] = {}
        for item in served:
            by_gateway.setdefault(judged.owner(item.attachment.gateway), []).append(item)
        l4_by_gateway: dict[ObjectKey, list[ServedL4Route]] = {}
        for l4_item in served_l4:
            owner = judged.owner(l4_item.attachment.gateway)
            l4_by_gateway.setdefault(owner, []).append(l4_item)
        gateways = judged.ordered()
        groups: dict[str, NodeGroup] = {}
        for verdict in gateways:
            key = verdict.gateway.key
            groups[group_name(key)] = node_group(
                group_name(key),
                judged.with_children(verdict),
                by_gateway.get(key, []),
                l4_by_gateway.get(key, []),
            )
        served_gateways = by_gateway.keys() | l4_by_gateway.keys()
        single = self._single and not served_gateways - {gateways[0].gateway.key}
        if single:
            everyone = dataclasses.replace(next(iter(groups.values())), name=ALL_GATEWAYS)
            referenced: Iterable[str] = everyone.clusters
        else:
            every = [item for verdict in gateways for item in judged.with_children(verdict)]
            everyone = node_group(ALL_GATEWAYS, every, served, served_l4)
            referenced = sorted(
                {name for group in (everyone, *groups.values()) for name in group.clusters}
            )
        shadowed = {} if single else self._every_shadowed
        return ServedGroups({ALL_GATEWAYS: everyone, **groups}, referenced, shadowed)

    def _served_elsewhere(self, routes: RouteIndex) -> bool:
        """Whether routes are served on the listeners of a ListenerSet whose Gateway is not
        the one Gateway (then the all-gateways group is made of every listener)."""
        judged = self._judged
        if not judged.listener_sets:
            return False
        (only,) = judged.gateways.values()
        return any(
            judged.owner(item.attachment.gateway) != only.gateway.key
            for entry in routes.entries.values()
            for _, item in entry.served()
        )
