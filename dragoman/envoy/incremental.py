"""DAG → snapshots, reusing what the previous translation serialized.

A cluster, CLA, listener or virtual host whose DAG value is unchanged keeps its serialized
bytes (the same Resource object, so its hash too), and a snapshot type whose resources are
all unchanged keeps its TypeSnapshot (its version). A route table with one changed virtual
host serializes that host alone: the RouteConfiguration's bytes are its other fields with
the virtual hosts' bytes spliced in, as protobuf's deterministic serialization (fields in
number order, a repeated message field as one length-delimited entry per element) writes
them. The result is byte for byte what `translate` gives for the same DAG.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envoy.config.route.v3 import route_pb2
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

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
    TlsCertificate,
    VirtualHost,
)
from dragoman.envoy.clusters import cluster
from dragoman.envoy.listeners import listener
from dragoman.envoy.options import DEFAULT_OPTIONS, TranslateOptions
from dragoman.envoy.routes import route_configuration, virtual_host
from dragoman.envoy.secrets import SdsValue, sds_name, secret
from dragoman.envoy.translate import assignment_resource
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

# RouteConfiguration.virtual_hosts: field 2, length-delimited.
_VIRTUAL_HOSTS_TAG = bytes([(2 << 3) | 2])
_ROUTE_CONFIGURATION = "type.googleapis.com/" + route_pb2.RouteConfiguration.DESCRIPTOR.full_name


@dataclass(slots=True)
class _Table:
    value: RouteTable
    resource: Resource
    # Where the entry (tag, length, message) of each of value.virtual_hosts starts in the
    # resource's body, from `start` (the first one's), and where the last one ends: the
    # entries are read from the body, not kept a second time.
    start: int
    offsets: array[int]


# By the id of a group's clusters tuple: (the tuple, CDS, EDS); by the id of its route
# tables tuple: ((listeners, route tables), LDS, RDS).
_Shared = tuple[
    dict[int, tuple[Any, TypeSnapshot, TypeSnapshot, Any]],
    dict[int, tuple[Any, TypeSnapshot, TypeSnapshot, Any]],
]


@dataclass(slots=True)
class _Made:
    """What one translation made or reused, by name: the next one's to reuse."""

    clusters: dict[str, tuple[Cluster, Resource]] = field(default_factory=dict)
    assignments: dict[str, tuple[LoadAssignment, Resource]] = field(default_factory=dict)
    listeners: dict[str, tuple[Listener, Resource]] = field(default_factory=dict)
    tables: dict[str, _Table] = field(default_factory=dict)
    secrets: dict[str, tuple[SdsValue, Resource]] = field(default_factory=dict)
    # By group: what its clusters and CLAs were made of, and their TypeSnapshots.
    upstreams: dict[str, tuple[Any, Any, Any, TypeSnapshot, TypeSnapshot, Any]] = field(
        default_factory=dict
    )


class IncrementalTranslation:
    """Translates successive DAGs, each reusing the previous one's serialized resources."""

    def __init__(self, options: TranslateOptions = DEFAULT_OPTIONS) -> None:
        self._options = options
        self._clusters: dict[str, tuple[Cluster, Resource]] = {}
        self._assignments: dict[str, tuple[LoadAssignment, Resource]] = {}
        self._listeners: dict[str, tuple[Listener, Resource]] = {}
        self._tables: dict[str, _Table] = {}
        self._secrets: dict[str, tuple[SdsValue, Resource]] = {}
        self._upstreams: dict[str, tuple[Any, Any, Any, TypeSnapshot, TypeSnapshot, Any]] = {}
        self._snapshots: dict[str, Snapshot] = {}

    def translate(self, dag: Dag) -> dict[str, Snapshot]:
        made = _Made()
        shared: _Shared = ({}, {})
        result = {
            name: self._snapshot(name, group, dag, made, shared)
            for name, group in sorted(dag.groups.items())
        }
        self._clusters, self._assignments = made.clusters, made.assignments
        self._listeners, self._tables, self._snapshots = made.listeners, made.tables, result
        self._upstreams, self._secrets = made.upstreams, made.secrets
        return result

    def _snapshot(
        self,
        name: str,
        group: NodeGroup,
        dag: Dag,
        made: _Made,
        shared: _Shared,
    ) -> Snapshot:
        before = self._snapshots.get(name)
        # Groups sharing the DAG's tuples (one Gateway: its group and every Envoy's) share
        # their TypeSnapshots too.
        upstreams, frontends = shared
        upstream = upstreams.get(id(group.clusters))
        last = self._upstreams.get(name)
        if (
            (upstream is None or upstream[0] is not group.clusters)
            and last is not None
            and last[0] is group.clusters
            and last[1] is dag.clusters
            and last[2] is dag.load_assignments
        ):
            # Nothing a cluster or CLA is made of changed since the last translation: its
            # resources are all still the ones made before (kept for the next one too).
            upstream = group.clusters, last[3], last[4], last[5]
            made.clusters = {**self._clusters, **made.clusters}
            made.assignments = {**self._assignments, **made.assignments}
        if upstream is None or upstream[0] is not group.clusters:
            cluster_resources, assignment_resources, client = self._upstream(group, dag, made)
            upstream = (
                group.clusters,
                _type_snapshot(cluster_resources, before, CLUSTER),
                _type_snapshot(assignment_resources, before, ENDPOINT),
                client,
            )
            upstreams[id(group.clusters)] = upstream
        frontend = frontends.get(id(group.route_tables))
        if (
            frontend is None
            or frontend[0][0] is not group.listeners
            or frontend[0][1] is not group.route_tables
        ):
            listener_resources = [self._listener(v, made.listeners) for v in group.listeners]
            table_resources = [self._table(v, made.tables) for v in group.route_tables]
            frontend = (
                (group.listeners, group.route_tables),
                _type_snapshot(listener_resources, before, LISTENER),
                _type_snapshot(table_resources, before, ROUTE),
                tuple(_listener_certificates(group.listeners)),
            )
            frontends[id(group.route_tables)] = frontend
        made.upstreams[name] = (
            group.clusters,
            dag.clusters,
            dag.load_assignments,
            upstream[1],
            upstream[2],
            upstream[3],
        )
        secrets = self._secrets_of((*frontend[3], *upstream[3]), made)
        return Snapshot(
            types={
                CLUSTER: upstream[1],
                ENDPOINT: upstream[2],
                SECRET: _type_snapshot(secrets, before, SECRET),
                LISTENER: frontend[1],
                ROUTE: frontend[2],
            }
        )

    def _secrets_of(self, certificates: Iterable[SdsValue], made: _Made) -> list[Resource]:
        """What translate serves as SDS secrets for these certificates (listeners' first, then
        clusters' client certificates): one per name, sorted."""
        used: dict[str, SdsValue] = {}
        for certificate in certificates:
            used.setdefault(sds_name(certificate), certificate)
        resources = []
        for name, certificate in sorted(used.items()):
            known = made.secrets.get(name) or self._secrets.get(name)
            if known is None or not (known[0] is certificate or known[0] == certificate):
                known = certificate, Resource.of(name, secret(certificate))
            made.secrets[name] = known
            resources.append(known[1])
        return resources

    def _upstream(
        self, group: NodeGroup, dag: Dag, made: _Made
    ) -> tuple[list[Resource], list[Resource], tuple[TlsCertificate, ...]]:
        defined, made_clusters, known_clusters = dag.clusters, made.clusters, self._clusters
        cluster_resources = []
        assignment_resources = []
        client: list[TlsCertificate] = []
        # The loop every change runs over every cluster: the unchanged case inline.
        for cluster_name in group.clusters:
            value = defined.get(cluster_name)
            if value is None:
                continue  # its routes answer 503 until it appears (as in translate)
            known = made_clusters.get(cluster_name) or known_clusters.get(cluster_name)
            if known is None or known[0] is not value:
                known = self._cluster(cluster_name, value, known)
            made_clusters[cluster_name] = known
            cluster_resources.append(known[1])
            tls = getattr(value, "tls", None)
            if tls is not None and tls.client_certificate is not None:
                client.append(tls.client_certificate)
            # Pods, and external names whose addresses dragoman serves (checked or fixed).
            if type(value) is EdsCluster or (type(value) is DnsCluster and value.served_over_eds):
                assignment = dag.load_assignments.get(cluster_name) or LoadAssignment(
                    cluster=cluster_name
                )
                assignment_resources.append(self._assignment(assignment, made.assignments))
        return cluster_resources, assignment_resources, tuple(client)

    def _cluster(
        self, name: str, value: Cluster, known: tuple[Cluster, Resource] | None
    ) -> tuple[Cluster, Resource]:
        # An equal value (a full build makes new objects) keeps the bytes; the new object is
        # remembered so the next translation finds it by identity.
        resource = known[1] if known is not None and known[0] == value else None
        return value, resource or Resource.of(name, cluster(value, self._options))

    def _assignment(
        self, value: LoadAssignment, made: dict[str, tuple[LoadAssignment, Resource]]
    ) -> Resource:
        name = value.cluster
        known = made.get(name) or self._assignments.get(name)
        if known is None or known[0] is not value:
            resource = known[1] if known is not None and known[0] == value else None
            known = value, resource or assignment_resource(value)
        made[name] = known
        return known[1]

    def _listener(self, value: Listener, made: dict[str, tuple[Listener, Resource]]) -> Resource:
        known = made.get(value.name) or self._listeners.get(value.name)
        if known is None or known[0] is not value:
            resource = known[1] if known is not None and known[0] == value else None
            known = value, resource or Resource.of(value.name, listener(value, self._options))
        made[value.name] = known
        return known[1]

    def _table(self, value: RouteTable, made: dict[str, _Table]) -> Resource:
        known = made.get(value.name) or self._tables.get(value.name)
        if known is not None and (
            known.value is value or known.value.virtual_hosts is value.virtual_hosts
        ):
            made[value.name] = known
            return known.resource
        # Each virtual host unchanged since the last table keeps its bytes: consecutive ones
        # are taken from the last table's body as one piece, their offsets shifted at once.
        old: tuple[VirtualHost, ...] = known.value.virtual_hosts if known is not None else ()
        offsets = known.offsets if known is not None else array("Q", [0])
        body = memoryview(known.resource.body) if known is not None else memoryview(b"")
        first = known.start if known is not None else 0
        by_name: dict[str, int] | None = None  # made when hosts came, went or moved
        pieces: list[bytes | memoryview] = []
        placed = array("Q")  # where each entry starts, from the first one's start
        position = 0
        run = -1  # the first old host of the run being reused (-1: none)
        after = 0  # the old host after the last one matched: the next one's likely match

        def reuse_run() -> None:
            nonlocal position
            if run >= 0:
                begin, end = offsets[run], offsets[after]
                pieces.append(body[first + begin : first + end])
                placed.extend(map((position - begin).__add__, offsets[run:after]))
                position += end - begin

        for host in value.virtual_hosts:
            index: int | None = after
            if after >= len(old) or old[after].name != host.name:
                if by_name is None:
                    by_name = {h.name: i for i, h in enumerate(old)}
                index = by_name.get(host.name)
            if index is not None and (old[index] is host or old[index] == host):
                if run < 0 or index != after:
                    reuse_run()
                    run = index
                after = index + 1
                continue
            reuse_run()
            run = -1
            if index is not None:
                after = index + 1
            message = virtual_host(host).SerializeToString(deterministic=True)
            entry = _VIRTUAL_HOSTS_TAG + _VarintBytes(len(message)) + message
            pieces.append(entry)
            placed.append(position)
            position += len(entry)
        reuse_run()
        placed.append(position)
        resource, start = _spliced(value, pieces)
        table = _Table(value, resource, start, placed)
        made[value.name] = table
        return table.resource


def spliced_route_table(value: RouteTable, virtual_hosts: list[bytes]) -> Resource:
    """`value`'s RouteConfiguration, its virtual hosts given already serialized (each with
    its field tag and length), as translate serializes it whole. The table's other fields are
    those route_configuration gives a table without virtual hosts (none depends on them)."""
    return _spliced(value, virtual_hosts)[0]


def _spliced(
    value: RouteTable, virtual_hosts: Sequence[bytes | memoryview]
) -> tuple[Resource, int]:
    """spliced_route_table, and where the first virtual host starts in its body."""
    rest = route_configuration(RouteTable(value.name, ())).SerializeToString(deterministic=True)
    name = route_pb2.RouteConfiguration(name=value.name).SerializeToString(deterministic=True)
    if not rest.startswith(name):
        raise AssertionError("RouteConfiguration does not serialize its name first")
    body = b"".join((name, *virtual_hosts, rest[len(name) :]))
    return Resource.of_bytes(value.name, _ROUTE_CONFIGURATION, body), len(name)


def _listener_certificates(listeners: Iterable[Listener]) -> Iterator[SdsValue]:
    for value in listeners:
        if isinstance(value, HttpsListener | TcpListener):
            for chain in value.filter_chains:
                yield from chain.certificates
                if chain.client_validation is not None:
                    yield chain.client_validation


def _type_snapshot(
    resources: list[Resource], before: Snapshot | None, type_url: str
) -> TypeSnapshot:
    """The previous TypeSnapshot when it holds exactly these Resource objects."""
    if before is not None:
        previous = before.of_type(type_url)
        held = previous.resources
        if len(resources) == len(held) and all(held.get(r.name) is r for r in resources):
            return previous
    return TypeSnapshot.of(resources)


def unchanged_groups(before: Mapping[str, Snapshot], after: Mapping[str, Snapshot]) -> bool:
    """True when every group's snapshot is the same object as before."""
    return before.keys() == after.keys() and all(before[k] is after[k] for k in after)
