"""DAG → one Snapshot per node group, reusing what the previous translation serialized.

A cluster, CLA, listener, secret or virtual host whose DAG value is unchanged keeps its
serialized bytes (the same Resource object, so its hash too), and a snapshot type whose
resources are all unchanged keeps its TypeSnapshot (its version). A full translation is the
same translation starting from nothing (`translate`). Within one translation every resource
is built and serialized once, and the same Resource object is shared by every group that
serves it; groups sharing the DAG's tuples (one Gateway: its group and every Envoy's) share
their TypeSnapshots too.

The EDS fast path (`translate_endpoints`) makes only the CLAs, from the previous snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from dragoman.dag.model import (
    Cluster,
    Dag,
    HttpListener,
    HttpsListener,
    Listener,
    LoadAssignment,
    NodeGroup,
    RouteTable,
    TcpListener,
    TlsCertificate,
    TlsFilterChain,
    VirtualHost,
    changed_keys_since,
)
from dragoman.envoy.resources.sds_secrets import SdsValue, sds_name, secret
from dragoman.envoy.translate_options import DEFAULT_OPTIONS, TranslateOptions
from dragoman.envoy.translation.route_scopes import GroupScopes, group_scopes, scoped_table
from dragoman.envoy.translation.route_splicing import SplicedTable, spliced_table
from dragoman.envoy.translation.translated import (
    Translated,
    assignment_resource,
    cluster_resource,
    listener_resource,
)
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)


@dataclass(frozen=True, slots=True)
class _Upstream:
    """A group's clusters and CLAs, and what they were made of."""

    clusters: tuple[str, ...]  # the group's (by identity)
    defined: Mapping[str, Cluster]  # the DAG's clusters (by identity)
    assignments: Mapping[str, LoadAssignment]  # the DAG's (by identity)
    cds: TypeSnapshot
    eds: TypeSnapshot
    client_certificates: tuple[TlsCertificate, ...]


@dataclass(frozen=True, slots=True)
class _Frontend:
    """A group's listeners and route tables, and the certificates (and clients' CA
    certificates) its listeners name."""

    listeners: tuple[Listener, ...]  # the group's (by identity)
    route_tables: tuple[RouteTable, ...]  # the group's (by identity)
    lds: TypeSnapshot
    rds: TypeSnapshot
    certificates: tuple[SdsValue, ...]
    scopes: GroupScopes | None = None  # None: no listener of the group is scoped


@dataclass(slots=True)
class _Made:
    """What one translation made or reused, by name: the next one's to reuse."""

    clusters: dict[str, tuple[Cluster, Resource]] = field(default_factory=dict)
    assignments: dict[str, tuple[LoadAssignment, Resource]] = field(default_factory=dict)
    listeners: dict[str, tuple[Listener, Resource]] = field(default_factory=dict)
    tables: dict[str, SplicedTable] = field(default_factory=dict)
    # Scopes made (or kept as equal) in this translation, by name: shared by every group.
    scopes: dict[str, tuple[VirtualHost, Resource]] = field(default_factory=dict)
    frontends: dict[str, _Frontend] = field(default_factory=dict)  # by group
    secrets: dict[str, tuple[SdsValue, Resource]] = field(default_factory=dict)
    upstreams: dict[str, _Upstream] = field(default_factory=dict)  # by group
    # Within this translation, by the id of the group's tuple they derive from.
    shared_upstreams: dict[int, _Upstream] = field(default_factory=dict)
    shared_frontends: dict[int, _Frontend] = field(default_factory=dict)
    # Some group reused the last translation's clusters and CLAs as they were: every one of
    # them is kept for the next translation, but those a patch took out of a group (`gone`)
    # and none made again (else each name ever served would stay until a full translation).
    kept_upstreams: bool = False
    gone: list[str] = field(default_factory=list)

    def keep(
        self,
        clusters: Mapping[str, tuple[Cluster, Resource]],
        assignments: Mapping[str, tuple[LoadAssignment, Resource]],
    ) -> None:
        """The last translation's `clusters` and `assignments` kept beside those made."""
        made_clusters, made_assignments = self.clusters, self.assignments
        self.clusters = {**clusters, **made_clusters}
        self.assignments = {**assignments, **made_assignments}
        for name in self.gone:
            if name not in made_clusters:
                self.clusters.pop(name, None)
            if name not in made_assignments:
                self.assignments.pop(name, None)


def translate(dag: Dag, options: TranslateOptions = DEFAULT_OPTIONS) -> dict[str, Snapshot]:
    """Every group's snapshot, translated from nothing."""
    return Translation(options).translate(dag)


def translate_endpoints(
    dag: Dag,
    previous: Mapping[str, Snapshot],
    *,
    options: TranslateOptions = DEFAULT_OPTIONS,
) -> dict[str, Snapshot]:
    """The EDS fast path: only endpoints changed since `previous` was translated.

    Clusters, listeners, routes and secrets are reused from `previous` as they are; CLAs
    whose LoadAssignment is unchanged reuse the previous Resource. A group `previous` lacks
    is translated in full with `options`.
    """
    return Translation(options).translate_endpoints(dag, previous)


class Translation:
    """Translates successive DAGs, each reusing the previous one's serialized resources."""

    def __init__(self, options: TranslateOptions = DEFAULT_OPTIONS) -> None:
        self._options = options
        self._clusters: dict[str, tuple[Cluster, Resource]] = {}
        self._assignments: dict[str, tuple[LoadAssignment, Resource]] = {}
        self._listeners: dict[str, tuple[Listener, Resource]] = {}
        self._tables: dict[str, SplicedTable] = {}
        self._frontends: dict[str, _Frontend] = {}
        self._secrets: dict[str, tuple[SdsValue, Resource]] = {}
        self._upstreams: dict[str, _Upstream] = {}
        self._snapshots: dict[str, Snapshot] = {}

    def translate(self, dag: Dag) -> dict[str, Snapshot]:
        made = _Made()
        result = {
            name: self._snapshot(name, group, dag, made)
            for name, group in sorted(dag.groups.items())
        }
        if made.kept_upstreams:
            made.keep(self._clusters, self._assignments)
        self._clusters, self._assignments = made.clusters, made.assignments
        self._listeners, self._tables, self._snapshots = made.listeners, made.tables, result
        self._frontends = made.frontends
        self._upstreams, self._secrets = made.upstreams, made.secrets
        return result

    def translate_endpoints(
        self, dag: Dag, previous: Mapping[str, Snapshot]
    ) -> dict[str, Snapshot]:
        """`translate_endpoints`, by a Translation of its own."""
        # The CLAs `previous` serves, the first group's where two differ (as a dict update
        # in reverse: one C loop, not one Python step per CLA).
        earlier: dict[str, Resource] = {}
        for snapshot in reversed(list(previous.values())):
            earlier.update(snapshot.of_type(ENDPOINT).resources)
        made = _Made()
        result: dict[str, Snapshot] = {}
        for name, group in sorted(dag.groups.items()):
            before = previous.get(name)
            if before is None:
                result[name] = self._snapshot(name, group, dag, made)
                continue
            assignments = self._endpoints(group, dag, made.assignments, earlier)
            types = dict(before.types)  # clusters, secrets, listeners and routes as they were
            types[ENDPOINT] = _type_snapshot(assignments, before, ENDPOINT)
            result[name] = Snapshot(types=types)
        return result

    def _endpoints(
        self,
        group: NodeGroup,
        dag: Dag,
        made: dict[str, tuple[LoadAssignment, Resource]],
        earlier: Mapping[str, Resource],
    ) -> list[Resource]:
        """The group's CLAs, each an `earlier` one whose LoadAssignment is unchanged."""
        clusters = dag.clusters
        resources = []
        for name in group.clusters:
            cluster = clusters.get(name)
            if cluster is None or not cluster.served_over_eds:
                continue
            known = made.get(name)
            if known is None:
                value = _assignment_of(name, dag)
                before = earlier.get(name)
                if isinstance(before, Translated) and (
                    before.source is value or before.source == value
                ):
                    known = value, before
                else:
                    known = value, self._assignment(value, made)
                made[name] = known
            resources.append(known[1])
        return resources

    def _snapshot(self, name: str, group: NodeGroup, dag: Dag, made: _Made) -> Snapshot:
        before = self._snapshots.get(name)
        upstream = self._upstream(name, group, dag, made, before)
        frontend = made.shared_frontends.get(id(group.route_tables))
        if (
            frontend is None
            or frontend.listeners is not group.listeners
            or frontend.route_tables is not group.route_tables
        ):
            frontend = self._frontend(group, made, before, self._frontends.get(name))
            made.shared_frontends[id(group.route_tables)] = frontend
        made.upstreams[name] = upstream
        made.frontends[name] = frontend
        secrets = self._secrets_of((*frontend.certificates, *upstream.client_certificates), made)
        types = {
            CLUSTER: upstream.cds,
            ENDPOINT: upstream.eds,
            SECRET: _type_snapshot(secrets, before, SECRET),
            LISTENER: frontend.lds,
            ROUTE: frontend.rds,
        }
        if frontend.scopes is not None:  # only a group with a scoped listener has the type
            types[SCOPED_ROUTE] = frontend.scopes.listing.snapshot
        return Snapshot(types=types)

    def _upstream(
        self, name: str, group: NodeGroup, dag: Dag, made: _Made, before: Snapshot | None
    ) -> _Upstream:
        shared = made.shared_upstreams.get(id(group.clusters))
        if shared is not None and shared.clusters is group.clusters:
            return shared
        last = self._upstreams.get(name)
        if (
            last is not None
            and last.clusters is group.clusters
            and last.defined is dag.clusters
            and last.assignments is dag.load_assignments
        ):
            # Nothing a cluster or CLA is made of changed since the last translation: its
            # resources are all still the ones made before (kept for the next one too).
            made.kept_upstreams = True
            made.shared_upstreams[id(group.clusters)] = last
            return last
        if last is not None and last.clusters is group.clusters and last.defined is dag.clusters:
            # Only load assignments changed (the EDS fast path of the build): the same
            # clusters and CLA names, those CLAs whose LoadAssignment changed made again.
            upstream = self._with_assignments(last, dag, made)
            made.shared_upstreams[id(group.clusters)] = upstream
            return upstream
        if last is not None and (patched := self._patched(last, group, dag, made)) is not None:
            made.shared_upstreams[id(group.clusters)] = patched
            return patched
        cluster_resources, assignment_resources, client = self._upstream_resources(group, dag, made)
        upstream = _Upstream(
            group.clusters,
            dag.clusters,
            dag.load_assignments,
            _type_snapshot(cluster_resources, before, CLUSTER),
            _type_snapshot(assignment_resources, before, ENDPOINT),
            client,
        )
        made.shared_upstreams[id(group.clusters)] = upstream
        return upstream

    def _with_assignments(self, last: _Upstream, dag: Dag, made: _Made) -> _Upstream:
        """`last` with the CLAs whose LoadAssignment is not the one it was made of made
        again: one step per load assignment, not a cluster's translation per cluster."""
        made.kept_upstreams = True  # every cluster, and every CLA not made again, as they were
        before, now, held = last.assignments, dag.load_assignments, last.eds.resources
        patched = changed_keys_since(now, before)  # a patch of `before` says what it changed
        if patched is not None:
            changed = sorted(patched)
        else:
            changed = [name for name, value in now.items() if before.get(name) is not value]
            changed.extend(before.keys() - now.keys())  # served empty now (_assignment_of)
        replaced = {
            name: self._assignment(_assignment_of(name, dag), made.assignments)
            for name in changed
            if name in held
        }
        return _Upstream(
            last.clusters,
            last.defined,
            now,
            last.cds,
            last.eds.replaced(replaced),
            last.client_certificates,
        )

    def _patched(
        self, last: _Upstream, group: NodeGroup, dag: Dag, made: _Made
    ) -> _Upstream | None:
        """`last` with what `_touched` names made again, put in or taken out: what a full
        translation makes (a CLA is named like its cluster), at a cost of what changed."""
        members = frozenset(group.clusters)
        touched = _touched(last, group, dag, members)
        if touched is None:
            return None
        defined = dag.clusters
        clusters_put, assignments_put = dict[str, Resource](), dict[str, Resource]()
        gone: list[str] = []  # clusters, or the CLAs of clusters no longer served over EDS
        for name in sorted(touched):
            value = defined.get(name) if name in members else None
            if value is None:
                gone.append(name)
                continue
            if _client_certificate(value) is not None:
                return None
            known = made.clusters.get(name) or self._clusters.get(name)
            if known is None or known[0] is not value:
                known = _cluster(value, known, self._options)
            made.clusters[name] = known
            clusters_put[name] = known[1]
            if known[1].references:
                assignment = _assignment_of(name, dag)
                assignments_put[name] = self._assignment(assignment, made.assignments)
            else:
                gone.append(name)
        made.kept_upstreams = True  # every cluster and CLA not made here, as they were
        made.gone.extend(gone)
        return _Upstream(
            group.clusters,
            defined,
            dag.load_assignments,
            last.cds.patched(clusters_put, gone),
            last.eds.patched(assignments_put, gone),
            (),
        )

    def _upstream_resources(
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
                continue  # its routes answer 503 until it appears
            known = made_clusters.get(cluster_name) or known_clusters.get(cluster_name)
            if known is None or known[0] is not value:
                known = _cluster(value, known, self._options)
            made_clusters[cluster_name] = known
            cluster_resources.append(known[1])
            certificate = _client_certificate(value)
            if certificate is not None:
                client.append(certificate)
            # The CLA an EDS cluster names (translation named it after served_over_eds).
            for assignment_name in known[1].references:
                assignment = _assignment_of(assignment_name, dag)
                assignment_resources.append(self._assignment(assignment, made.assignments))
        return cluster_resources, assignment_resources, tuple(client)

    def _frontend(
        self, group: NodeGroup, made: _Made, before: Snapshot | None, last: _Frontend | None
    ) -> _Frontend:
        listener_resources = [self._listener(v, made.listeners) for v in group.listeners]
        scoped = {
            v.route_table for v in group.listeners if isinstance(v, HttpListener) and v.scoped
        }
        table_resources = [
            self._table(v, made.tables) for v in group.route_tables if v.name not in scoped
        ]
        return _Frontend(
            group.listeners,
            group.route_tables,
            _type_snapshot(listener_resources, before, LISTENER),
            _type_snapshot(table_resources, before, ROUTE),
            tuple(listener_certificates(group.listeners)),
            _scopes(group, scoped, made, last.scopes if last is not None else None),
        )

    def _secrets_of(self, certificates: Iterable[SdsValue], made: _Made) -> list[Resource]:
        """The SDS secrets of these certificates and validation contexts (listeners' first,
        then clusters' client certificates): one per name, sorted. No group gets another's
        keys."""
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
            known = value, resource or listener_resource(value, self._options)
        made[value.name] = known
        return known[1]

    def _table(self, value: RouteTable, made: dict[str, SplicedTable]) -> Resource:
        known = made.get(value.name) or self._tables.get(value.name)
        if known is None or not (
            known.value is value or known.value.virtual_hosts is value.virtual_hosts
        ):
            known = spliced_table(value, known)
        made[value.name] = known
        return known.resource


def _cluster(
    value: Cluster, known: tuple[Cluster, Resource] | None, options: TranslateOptions
) -> tuple[Cluster, Resource]:
    # An equal value (a full build makes new objects) keeps the bytes; the new object is
    # remembered so the next translation finds it by identity.
    resource = known[1] if known is not None and known[0] == value else None
    return value, resource or cluster_resource(value, options)


def _scopes(
    group: NodeGroup, scoped: set[str], made: _Made, last: GroupScopes | None
) -> GroupScopes | None:
    """The group's scopes, only what changed since its `last` ones made again."""
    if not scoped:
        return None
    known = last.tables if last is not None else {}
    tables = [
        scoped_table(table, known.get(table.name), made.scopes)
        for table in group.route_tables
        if table.name in scoped
    ]
    return group_scopes(tables, last)


# At most this many clusters and CLAs changed are patched into a group's snapshots; more are
# translated in full (each step of a patch costs more than one of the full loop).
_PATCHED_UP_TO = 1024


def _touched(
    last: _Upstream, group: NodeGroup, dag: Dag, members: frozenset[str]
) -> set[str] | None:
    """The names of the clusters and CLAs that may differ from `last`'s for `group` in `dag`
    (added to the group, taken out, or changed); None when clusters present client
    certificates or when more than _PATCHED_UP_TO may differ."""
    if last.client_certificates:
        return None
    defined, before = dag.clusters, last.defined
    assignments, assignments_before = dag.load_assignments, last.assignments
    touched: set[str] = set()
    if group.clusters is not last.clusters:
        touched.update(members.symmetric_difference(last.clusters))
    hint = dag.changed_clusters
    if defined is not before and hint is not None and hint[0] == id(before):
        touched.update(hint[1])  # the build knows (`before` is alive: its id names it)
    elif defined is not before:
        touched.update(n for n, value in defined.items() if before.get(n) is not value)
        touched.update(before.keys() - defined.keys())
    if assignments is not assignments_before:
        touched.update(
            n for n, value in assignments.items() if assignments_before.get(n) is not value
        )
        touched.update(assignments_before.keys() - assignments.keys())
    return touched if len(touched) <= _PATCHED_UP_TO else None


def listener_certificates(listeners: Iterable[Listener]) -> Iterator[SdsValue]:
    """The certificates HTTPS and TLS-terminating listeners serve, the CA certificates they
    validate clients' with, and the credentials their routes inject, in their order."""
    for value in listeners:
        if isinstance(value, HttpListener):
            yield from value.credentials
        elif isinstance(value, HttpsListener | TcpListener):
            for chain in value.filter_chains:
                yield from chain.certificates
                if chain.client_validation is not None:
                    yield chain.client_validation
                if isinstance(chain, TlsFilterChain):
                    yield from chain.credentials


def _client_certificate(value: Cluster) -> TlsCertificate | None:
    """The certificate the cluster presents to its backends (mutual TLS), if any."""
    tls = getattr(value, "tls", None)  # an aggregate's TLS is its children's
    return tls.client_certificate if tls is not None else None


def _assignment_of(name: str, dag: Dag) -> LoadAssignment:
    # An EDS cluster with no known endpoints still gets an (empty) CLA, so Envoy finishes
    # warming it instead of waiting for the initial fetch timeout.
    return dag.load_assignments.get(name) or LoadAssignment(cluster=name)


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
