"""What is served, as a graph: Gateways → listeners → routes → backends (Services) →
clusters → endpoints. Every problem is attached to the node of the object it belongs to;
objects with problems that serve nothing appear on their own. A route's edges to its
Services carry the matches that lead there and each backend's share of the weight; an
endpoints node lists the endpoints that are not ready apart (served: none of them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from dragoman.dag.endpoint_readiness import not_ready_by_cluster
from dragoman.dag.model import (
    ALL_GATEWAYS,
    AggregateCluster,
    Backend,
    Cluster,
    DnsCluster,
    Forward,
    HttpsListener,
    L4Forward,
    NodeGroup,
    ObjectStatus,
    Problem,
    Route,
    RouteMatch,
    TcpListener,
    UdpListener,
)
from dragoman.objects import ObjectKey
from dragoman.runtime.debug.view import DebugView

COLUMNS = ("Gateways", "Listeners", "Routes", "Backends", "Clusters", "Endpoints")
GATEWAY, LISTENER, ROUTE, BACKEND, CLUSTER, ENDPOINTS = range(len(COLUMNS))
_SCHEMES = {HttpsListener: "https", TcpListener: "tcp", UdpListener: "udp"}
# Addresses listed on an endpoints node before "and N more".
SHOWN_ADDRESSES = 4
# Nodes drawn per column: a huge configuration still makes a page a browser can open.
MAX_PER_COLUMN = 400

_COLUMN_OF_KIND = {
    "Gateway": GATEWAY,
    "GatewayClass": GATEWAY,
    "ListenerSet": LISTENER,
    "HTTPRoute": ROUTE,
    "GRPCRoute": ROUTE,
    "TCPRoute": ROUTE,
    "TLSRoute": ROUTE,
    "UDPRoute": ROUTE,
    "ReferenceGrant": ROUTE,
    "Service": BACKEND,
    "BackendTLSPolicy": CLUSTER,
}


@dataclass(slots=True)
class Node:
    id: str
    column: int
    label: str
    details: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    refused: bool = False  # an external name refused, or DNS-failed
    # Lines drawn greyed: what exists but is not served (endpoints that are not ready).
    muted: list[str] = field(default_factory=list)
    idle: bool = False  # nothing of it is served (no ready endpoint): the box is greyed


@dataclass(slots=True)
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)
    # What an edge says (a route's matches and weight share toward a Service), in order.
    edge_labels: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    hidden: list[int] = field(default_factory=lambda: [0] * len(COLUMNS))

    def add(self, node_id: str, column: int, label: str) -> Node:
        node = self.nodes.get(node_id)
        if node is None:
            node = self.nodes[node_id] = Node(node_id, column, label)
        return node

    def link(self, source: str, target: str, label: str = "") -> None:
        if source != target:
            self.edges.add((source, target))
            labels = self.edge_labels.setdefault((source, target), [])
            if label and label not in labels:
                labels.append(label)

    def column(self, index: int) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.column == index), key=lambda n: n.id)


def object_id(key: ObjectKey) -> str:
    return str(key)


def problem_line(problem: Problem) -> str:
    """How a problem reads on its object's node (and, whole, in the problems table)."""
    where = f"{problem.field}: " if problem.field else ""
    return f"{where}{problem.message} ({problem.reason})"


def build_graph(view: DebugView) -> Graph:
    graph = Graph()
    dag = view.dag
    if dag is None:
        return graph
    groups = [g for name, g in sorted(dag.groups.items()) if name != ALL_GATEWAYS]
    if not groups and ALL_GATEWAYS in dag.groups:
        groups = [dag.groups[ALL_GATEWAYS]]
    for group in groups:
        _add_group(graph, group, dag.clusters, dag.statuses)
    waiting = not_ready_by_cluster(dag.clusters, view.store) if view.store is not None else {}
    for name, cluster in dag.clusters.items():
        if name in graph.nodes:
            _add_endpoints(graph, view, name, cluster, waiting)
    for problem in dag.problems:
        node_id = object_id(problem.object)
        node = graph.add(
            node_id, _COLUMN_OF_KIND.get(problem.object.kind, ROUTE), str(problem.object)
        )
        node.problems.append(problem_line(problem))
        # A backend refused for what it is (an unsafe external name, a policy) carries the
        # reason on its own node too, linked from the route that asked for it.
        if problem.message.startswith("Service "):
            named = problem.message[len("Service ") :].split(":", 1)[0]
            namespace, _, name = named.partition("/")
            service = ObjectKey("Service", namespace, name)
            if service in view.external_names and view.external_names[service] != "served":
                backend = graph.add(object_id(service), BACKEND, str(service))
                backend.problems.append(f"{problem.message} ({problem.reason})")
                graph.link(node_id, object_id(service))
    for key, state in view.external_names.items():
        node = graph.add(object_id(key), BACKEND, str(key))
        node.details.append(f"external name: {state}")
        node.refused = node.refused or state != "served"
    for key, policies in view.service_policies.items():
        if (service_node := graph.nodes.get(object_id(key))) is not None:
            for policy in policies:
                line = f"{policy.name}: {policy.state}"
                (service_node.details if policy.accepted else service_node.problems).append(line)
    _trim(graph)
    return graph


def _add_group(
    graph: Graph,
    group: NodeGroup,
    clusters: Mapping[str, Cluster],
    statuses: Mapping[ObjectKey, ObjectStatus],
) -> None:
    if group.name == ALL_GATEWAYS:
        gateway_id = "all Gateways"
        graph.add(gateway_id, GATEWAY, gateway_id)
    else:
        namespace, _, name = group.name.partition("/")
        key = ObjectKey("Gateway", namespace, name)
        gateway_id = object_id(key)
        node = graph.add(gateway_id, GATEWAY, gateway_id)
        status = statuses.get(key)
        addresses = status.status.get("addresses") if status is not None else None
        if addresses and not node.details:
            node.details.append("at " + ", ".join(str(a.get("value")) for a in addresses))
    tables = {table.name: table for table in group.route_tables}
    for listener in group.listeners:
        listener_id = f"listener {group.name or '*'} {listener.name}"
        scheme = _SCHEMES.get(type(listener), "http")
        graph.add(listener_id, LISTENER, f"{listener.name} ({scheme}, port {listener.port})")
        graph.link(gateway_id, listener_id)
        if isinstance(listener, TcpListener | UdpListener):
            _add_l4_routes(graph, listener_id, listener, clusters)
            continue
        names = (
            [chain.route_table for chain in listener.filter_chains]
            if isinstance(listener, HttpsListener)
            else [listener.route_table]
        )
        for table_name in names:
            table = tables.get(table_name)
            if table is None:
                continue
            for host in table.virtual_hosts:
                for route in host.routes:
                    route_id = object_id(route.source)
                    node = graph.add(route_id, ROUTE, route_id)
                    domains = ", ".join(host.domains)
                    if domains and f"hosts: {domains}" not in node.details:
                        node.details.append(f"hosts: {domains}")
                    graph.link(listener_id, route_id)
                    _add_route_backends(graph, route_id, route, clusters)


def _add_l4_routes(
    graph: Graph,
    listener_id: str,
    listener: TcpListener | UdpListener,
    clusters: Mapping[str, Cluster],
) -> None:
    """TCP, TLS and UDP listeners: each route (a TLS one per SNI) and where it sends."""
    served: list[tuple[tuple[str, ...], L4Forward]]
    if isinstance(listener, UdpListener):
        served = [((), listener.forward)]
    else:
        served = [(chain.server_names, chain.forward) for chain in listener.filter_chains]
    for server_names, forward in served:
        route_id = object_id(forward.source)
        node = graph.add(route_id, ROUTE, route_id)
        if server_names and f"SNI: {', '.join(server_names)}" not in node.details:
            node.details.append(f"SNI: {', '.join(server_names)}")
        graph.link(listener_id, route_id)
        for cluster_name, share in _shares(forward.backends):
            _add_backend(graph, route_id, cluster_name, clusters, share)


def _add_route_backends(
    graph: Graph, route_id: str, route: Route, clusters: Mapping[str, Cluster]
) -> None:
    """A route's edges to the Services it forwards to, each labelled with the match that
    leads there and the backend's share of the rule's weight; mirrors as such."""
    if not isinstance(route.action, Forward):
        return
    matched = describe_match(route.match)
    for cluster_name, share in _shares(route.action.backends):
        label = f"{matched} · {share}" if share else matched
        _add_backend(graph, route_id, cluster_name, clusters, label)
    for mirror in route.action.mirrors:
        percent = _percent(mirror.numerator, mirror.denominator)
        _add_backend(graph, route_id, mirror.cluster, clusters, f"{matched} · mirror {percent}")


def _shares(backends: tuple[Backend, ...]) -> list[tuple[str, str]]:
    """Each backend's cluster with its share of the weight ("" when it is the only one).
    A backend without a cluster (an invalid reference) keeps its share: it answers 500."""
    total = sum(backend.weight for backend in backends)
    return [
        (b.cluster, f"{_percent(b.weight, total)} (weight {b.weight})" if len(backends) > 1 else "")
        for b in backends
        if b.cluster is not None
    ]


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole, 1):g}%" if whole else "0%"


_PATH_WORDS = {"Exact": "exact", "PathPrefix": "prefix", "RegularExpression": "regex"}


def describe_match(match: RouteMatch) -> str:
    """A route match in a few words: `prefix /api POST version=two ?q=one` (`~` for a
    regular expression), `gRPC` for a gRPC-only match."""
    parts = [f"{_PATH_WORDS.get(match.path_type, match.path_type)} {match.path}"]
    if match.method:
        parts.append(match.method)
    parts += [f"{h.name}{'~' if h.regex else '='}{h.value}" for h in match.headers]
    parts += [f"?{q.name}{'~' if q.regex else '='}{q.value}" for q in match.query_params]
    if match.grpc:
        parts.append("gRPC")
    return " ".join(parts)


def _add_backend(
    graph: Graph,
    route_id: str,
    cluster_name: str,
    clusters: Mapping[str, Cluster],
    label: str = "",
) -> None:
    cluster = clusters.get(cluster_name)
    if cluster is None:
        graph.add(cluster_name, CLUSTER, cluster_name)
        graph.link(route_id, cluster_name, label)
        return
    service_id = object_id(cluster.service)
    graph.add(service_id, BACKEND, service_id)
    graph.link(route_id, service_id, label)
    graph.add(cluster_name, CLUSTER, cluster_name)
    graph.link(service_id, cluster_name)


def _add_endpoints(
    graph: Graph,
    view: DebugView,
    name: str,
    cluster: Cluster,
    not_ready: Mapping[str, list[str]],
) -> None:
    parts = cluster.children if isinstance(cluster, AggregateCluster) else (cluster,)
    for part in parts:
        endpoints_id = f"endpoints of {part.name}"
        if isinstance(part, DnsCluster):
            node = graph.add(endpoints_id, ENDPOINTS, f"{part.hostname}:{part.port} (DNS)")
            observation = view.dns.get(part.hostname)
            if observation is None:
                node.details.append("DNS check: off" if not view.dns_check else "not checked yet")
            elif observation.error is not None:
                node.details.append(f"DNS check: {observation.error}")
                node.refused = not observation.addresses
            else:
                node.details.append("DNS check: " + _some(observation.addresses))
        else:
            assignment = view.dag.load_assignments.get(part.name) if view.dag else None
            addresses = [
                f"{endpoint.address}:{endpoint.port}"
                for locality in (assignment.localities if assignment else ())
                for endpoint in locality.endpoints
            ]
            waiting = not_ready.get(part.name, [])
            count = f"{len(addresses)} endpoint{'' if len(addresses) == 1 else 's'}"
            node = graph.add(endpoints_id, ENDPOINTS, count)
            if addresses:
                node.details.append(_some(addresses))
            if waiting:
                node.label = f"{count}, {len(waiting)} not ready"
                node.muted.append("not ready: " + _some(waiting))
                node.idle = not addresses
        graph.link(name, endpoints_id)  # an aggregate's children: drawn as its endpoints


def _some(items: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(items[:SHOWN_ADDRESSES])
    more = len(items) - SHOWN_ADDRESSES
    return f"{shown} and {more} more" if more > 0 else shown


def _trim(graph: Graph) -> None:
    """At most MAX_PER_COLUMN nodes per column: those with problems first."""
    by_column: dict[int, list[Node]] = defaultdict(list)
    for node in graph.nodes.values():
        by_column[node.column].append(node)
    for column, nodes in by_column.items():
        if len(nodes) <= MAX_PER_COLUMN:
            continue
        nodes.sort(key=lambda n: (not (n.problems or n.refused), n.id))
        for node in nodes[MAX_PER_COLUMN:]:
            del graph.nodes[node.id]
        graph.hidden[column] = len(nodes) - MAX_PER_COLUMN
    graph.edges = {(a, b) for a, b in graph.edges if a in graph.nodes and b in graph.nodes}
    graph.edge_labels = {edge: graph.edge_labels[edge] for edge in graph.edges}
