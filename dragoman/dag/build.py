"""The DAG build: a Store in, a Dag out. Pure: no I/O, no clock, no shared state."""

from __future__ import annotations

from dragoman.dag.attach import attach
from dragoman.dag.backends import resolve_rule
from dragoman.dag.endpoints import load_assignments
from dragoman.dag.groups import ServedRoutes, node_group
from dragoman.dag.listeners import listener_problems
from dragoman.dag.model import ALL_GATEWAYS, Cluster, Dag, Problem
from dragoman.dag.options import BuildOptions
from dragoman.dag.routes import ranked_routes
from dragoman.store import Store


# BuildOptions is frozen, so one shared default instance is safe.
def build(store: Store, options: BuildOptions = BuildOptions()) -> Dag:
    """Listeners, route tables and clusters per node group, and every problem found."""
    problems: list[Problem] = []
    gateways = sorted(store.gateways.values(), key=lambda gateway: gateway.key)
    for gateway in gateways:
        problems.extend(listener_problems(gateway))

    served: list[ServedRoutes] = []
    resolved_clusters: dict[str, Cluster] = {}
    for http_route in sorted(store.http_routes.values(), key=lambda route: route.key):
        attachments, attach_problems = attach(http_route, store.gateways)
        problems.extend(attach_problems)
        # Backends are resolved even for an unattached route, so all its problems show at once.
        rules = [
            resolve_rule(http_route, index, rule, store.services, options)
            for index, rule in enumerate(http_route.rules)
        ]
        for rule in rules:
            problems.extend(rule.problems)
            resolved_clusters.update((cluster.name, cluster) for cluster in rule.clusters)
        ranked, route_problems = ranked_routes(http_route, [rule.action for rule in rules])
        problems.extend(route_problems)
        served.extend(ServedRoutes(attachment, tuple(ranked)) for attachment in attachments)

    groups = {ALL_GATEWAYS: node_group(ALL_GATEWAYS, gateways, served)}
    for gateway in gateways:
        name = f"{gateway.meta.namespace}/{gateway.meta.name}"
        own = [item for item in served if item.attachment.gateway == gateway.key]
        groups[name] = node_group(name, [gateway], own)

    # Only clusters some attached route forwards to; the all-gateways group references each.
    clusters = {name: resolved_clusters[name] for name in groups[ALL_GATEWAYS].clusters}
    return Dag(
        groups=groups,
        clusters=clusters,
        load_assignments=load_assignments(clusters, store),
        # Stable: an object's problems keep the order of its fields.
        problems=tuple(sorted(problems, key=lambda problem: problem.object)),
    )
