"""DAG → one Snapshot per node group.

Within one call every cluster, CLA, listener and route table is built and serialized once, and
the same Resource object is shared by every group that serves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from dragoman.dag.model import (
    Cluster,
    Dag,
    DnsCluster,
    EdsCluster,
    HttpsListener,
    Listener,
    LoadAssignment,
    NodeGroup,
    RouteTable,
    TcpListener,
)
from dragoman.envoy.clusters import cluster
from dragoman.envoy.endpoints import cluster_load_assignment
from dragoman.envoy.listeners import listener
from dragoman.envoy.options import DEFAULT_OPTIONS, TranslateOptions
from dragoman.envoy.routes import route_configuration
from dragoman.envoy.secrets import SdsValue, sds_name, secret
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)


@dataclass(frozen=True, slots=True)
class LoadAssignmentResource(Resource):
    """A CLA Resource that remembers the value it was built from.

    The EDS fast path compares values to find unchanged CLAs without serializing them again.
    """

    source: LoadAssignment | None = None


def translate(dag: Dag, options: TranslateOptions = DEFAULT_OPTIONS) -> dict[str, Snapshot]:
    translator = _Translator(dag, options)
    return {name: translator.snapshot(group) for name, group in sorted(dag.groups.items())}


def translate_endpoints(
    dag: Dag,
    previous: Mapping[str, Snapshot],
    *,
    options: TranslateOptions = DEFAULT_OPTIONS,
) -> dict[str, Snapshot]:
    """The EDS fast path: only endpoints changed since `previous` was translated.

    Clusters, listeners and routes are reused from `previous` as they are; CLAs whose
    LoadAssignment is unchanged reuse the previous Resource. A group `previous` lacks is
    translated in full with `options`.
    """
    reusable: dict[str, Resource] = {}
    for snapshot in previous.values():
        for name, resource in snapshot.of_type(ENDPOINT).resources.items():
            reusable.setdefault(name, resource)
    translator = _Translator(dag, options, reusable)
    result: dict[str, Snapshot] = {}
    for name, group in sorted(dag.groups.items()):
        before = previous.get(name)
        if before is None:
            result[name] = translator.snapshot(group)
            continue
        endpoints = _unless_same(translator.endpoints(group), before.of_type(ENDPOINT))
        result[name] = Snapshot(
            types={
                CLUSTER: before.of_type(CLUSTER),
                ENDPOINT: endpoints,
                SECRET: before.of_type(SECRET),
                LISTENER: before.of_type(LISTENER),
                ROUTE: before.of_type(ROUTE),
            }
        )
    return result


def _unless_same(resources: list[Resource], before: TypeSnapshot) -> TypeSnapshot:
    """Keep the previous TypeSnapshot object when it holds exactly these Resource objects."""
    if len(resources) == len(before.resources) and all(
        before.resources.get(r.name) is r for r in resources
    ):
        return before
    return TypeSnapshot.of(resources)


class _Translator:
    """Builds Resources for one DAG, memoizing each so groups share the same objects."""

    def __init__(
        self,
        dag: Dag,
        options: TranslateOptions,
        reusable_assignments: Mapping[str, Resource] | None = None,
    ) -> None:
        self._dag = dag
        self._options = options
        self._reusable_assignments = reusable_assignments or {}
        self._clusters: dict[str, Resource] = {}
        self._assignments: dict[str, Resource] = {}
        # By identity: groups share the DAG's listener and route table objects, and hashing a
        # route table by value walks its whole tree (thousands of virtual hosts).
        self._listeners: dict[int, tuple[Listener, Resource]] = {}
        self._route_tables: dict[int, tuple[RouteTable, Resource]] = {}
        self._secrets: dict[str, Resource] = {}
        # By the identity of the group's tuples they derive from: the all-gateways group of a
        # single Gateway shares its Gateway group's tuples, and so its TypeSnapshots.
        self._typed: dict[tuple[str, int, int], tuple[object, TypeSnapshot]] = {}

    def snapshot(self, group: NodeGroup) -> Snapshot:
        listeners, clusters = group.listeners, group.clusters
        return Snapshot(
            types={
                CLUSTER: self._type_snapshot(CLUSTER, clusters, (), self.clusters, group),
                ENDPOINT: self._type_snapshot(ENDPOINT, clusters, (), self.endpoints, group),
                SECRET: self._type_snapshot(SECRET, listeners, clusters, self.secrets, group),
                LISTENER: self._type_snapshot(LISTENER, listeners, (), self.listeners, group),
                ROUTE: self._type_snapshot(ROUTE, group.route_tables, (), self.route_tables, group),
            }
        )

    def _type_snapshot(
        self,
        type_url: str,
        source: tuple[object, ...],
        other_source: tuple[object, ...],
        resources: Callable[[NodeGroup], list[Resource]],
        group: NodeGroup,
    ) -> TypeSnapshot:
        """TypeSnapshot.of(resources(group)), which depends on the DAG and on the group's
        `source` (and `other_source`) tuples alone."""
        key = (type_url, id(source), id(other_source))
        known = self._typed.get(key)
        if known is None:
            # The sources are kept with it so their ids cannot be reused meanwhile.
            known = (source, other_source), TypeSnapshot.of(resources(group))
            self._typed[key] = known
        return known[1]

    def clusters(self, group: NodeGroup) -> list[Resource]:
        # A name the DAG does not define is skipped: its routes answer 503 until it appears.
        return [self._cluster(name) for name in group.clusters if name in self._dag.clusters]

    def endpoints(self, group: NodeGroup) -> list[Resource]:
        return [self._assignment(name) for name in self._eds_cluster_names(group)]

    def listeners(self, group: NodeGroup) -> list[Resource]:
        return [self._listener(value) for value in group.listeners]

    def secrets(self, group: NodeGroup) -> list[Resource]:
        """The certificates the group's listeners and clusters use (HTTPS and TLS-terminating
        listeners, client certificates to backends): no group gets another's keys."""
        used: dict[str, SdsValue] = {}
        for certificate in self._certificates(group):
            used.setdefault(sds_name(certificate), certificate)
        return [self._secret(name, certificate) for name, certificate in sorted(used.items())]

    def _certificates(self, group: NodeGroup) -> Iterator[SdsValue]:
        for value in group.listeners:
            if isinstance(value, HttpsListener | TcpListener):
                for chain in value.filter_chains:
                    yield from chain.certificates
                    if chain.client_validation is not None:
                        yield chain.client_validation
        clusters = self._dag.clusters
        for name in group.clusters:
            tls = getattr(clusters.get(name), "tls", None)
            if tls is not None and tls.client_certificate is not None:
                yield tls.client_certificate

    def _secret(self, name: str, certificate: SdsValue) -> Resource:
        resource = self._secrets.get(name)
        if resource is None:
            resource = self._secrets[name] = Resource.of(name, secret(certificate))
        return resource

    def route_tables(self, group: NodeGroup) -> list[Resource]:
        return [self._route_table(value) for value in group.route_tables]

    def _eds_cluster_names(self, group: NodeGroup) -> Iterable[str]:
        clusters = self._dag.clusters
        return (name for name in group.clusters if is_eds(clusters.get(name)))

    def _cluster(self, name: str) -> Resource:
        resource = self._clusters.get(name)
        if resource is None:
            resource = Resource.of(name, cluster(self._dag.clusters[name], self._options))
            self._clusters[name] = resource
        return resource

    def _assignment(self, name: str) -> Resource:
        resource = self._assignments.get(name)
        if resource is None:
            # An EDS cluster with no known endpoints still gets an (empty) CLA, so Envoy
            # finishes warming it instead of waiting for the initial fetch timeout.
            value = self._dag.load_assignments.get(name) or LoadAssignment(cluster=name)
            resource = self._reused_assignment(name, value) or assignment_resource(value)
            self._assignments[name] = resource
        return resource

    def _reused_assignment(self, name: str, value: LoadAssignment) -> Resource | None:
        before = self._reusable_assignments.get(name)
        if isinstance(before, LoadAssignmentResource) and (
            before.source is value or before.source == value
        ):
            return before
        return None

    def _listener(self, value: Listener) -> Resource:
        known = self._listeners.get(id(value))
        if known is None:
            # The value is kept with its resource so its id cannot be reused meanwhile.
            known = value, Resource.of(value.name, listener(value, self._options))
            self._listeners[id(value)] = known
        return known[1]

    def _route_table(self, value: RouteTable) -> Resource:
        known = self._route_tables.get(id(value))
        if known is None:
            known = value, Resource.of(value.name, route_configuration(value))
            self._route_tables[id(value)] = known
        return known[1]


def is_eds(value: Cluster | None) -> bool:
    """Whether Envoy takes the cluster's endpoints over EDS: pods, checked external names, or
    an ExternalName's externalIPs."""
    return isinstance(value, EdsCluster) or (
        isinstance(value, DnsCluster) and value.served_over_eds
    )


def assignment_resource(value: LoadAssignment) -> LoadAssignmentResource:
    """A CLA's Resource, remembering the LoadAssignment it was made from."""
    plain = Resource.of(value.cluster, cluster_load_assignment(value))
    return LoadAssignmentResource(
        name=plain.name,
        type_url=plain.type_url,
        body=plain.body,
        digest=plain.digest,
        source=value,
    )
