"""What every built DAG must satisfy, whatever its input: checked by the DAG test helpers on
every build they make, and by test_dag_invariants.py over whole manifest sets."""

from __future__ import annotations

from dragoman.dag.model import (
    AggregateCluster,
    Dag,
    Forward,
    HttpListener,
    HttpsListener,
    TcpListener,
    UdpListener,
)


def invariant_violations(dag: Dag) -> list[str]:
    """Each way `dag` breaks an invariant, as a sentence; [] when it holds them all."""
    found: list[str] = []
    referenced: set[str] = set()
    for name, group in dag.groups.items():
        label = repr(name or "all gateways")
        served = set(group.clusters)
        referenced |= served
        # An Envoy of this group asks for each of its clusters: the DAG must define them.
        found.extend(
            f"group {label} references cluster {cluster!r} that the DAG does not define"
            for cluster in group.clusters
            if cluster not in dag.clusters
        )
        tables = {table.name for table in group.route_tables}
        for listener in group.listeners:
            names = (
                [listener.route_table]
                if isinstance(listener, HttpListener)
                else [chain.route_table for chain in listener.filter_chains]
                if isinstance(listener, HttpsListener)
                else []
            )
            l4 = (
                [c for chain in listener.filter_chains for c in chain.forward.clusters]
                if isinstance(listener, TcpListener)
                else list(listener.forward.clusters)
                if isinstance(listener, UdpListener)
                else []
            )
            found.extend(
                f"group {label} listener {listener.name!r} sends to {cluster!r}, which the "
                "group does not serve"
                for cluster in l4
                if cluster not in served
            )
            found.extend(
                f"group {label} listener {listener.name!r} names missing route table {table!r}"
                for table in names
                if table not in tables
            )
        for table in group.route_tables:
            for vhost in table.virtual_hosts:
                for route in vhost.routes:
                    if not isinstance(route.action, Forward):
                        continue
                    found.extend(
                        f"group {label} route table {table.name!r} sends to {cluster!r}, "
                        "which the group does not serve"
                        for cluster in route.action.clusters
                        if cluster not in served
                    )
    for name, cluster in dag.clusters.items():
        if name not in referenced:
            found.append(f"cluster {name!r} is defined but no group serves it")
        if isinstance(cluster, AggregateCluster):
            found.extend(
                f"aggregate {name!r} names child {child.name!r} that the DAG does not define"
                for child in cluster.children
                if child.name not in dag.clusters
            )
    found.extend(
        f"load assignment {name!r} has no cluster"
        for name in dag.load_assignments
        if name not in dag.clusters
    )
    return found


def checked(dag: Dag) -> Dag:
    """`dag`, once it is known to hold every invariant (else the test fails, saying why)."""
    violations = invariant_violations(dag)
    assert not violations, "\n".join(violations)
    return dag
