"""Which port of an EndpointSlice serves an EDS cluster, and the endpoints each EDS cluster
leaves out for not being ready: what a person inspecting what is served wants to see beside
it (the load assignments hold the ready endpoints alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dragoman.dag.model import UDP, AggregateCluster, Cluster, EdsCluster
from dragoman.objects import EndpointPort, EndpointSlice
from dragoman.store import Store


def served_port(cluster: EdsCluster, ports: Sequence[EndpointPort]) -> EndpointPort | None:
    """The slice port that serves the cluster's Service port, None if the slice has none."""
    # HTTP and TCP clusters need a TCP port, UDP clusters a UDP one; both may share a number.
    wanted = "UDP" if cluster.protocol == UDP else "TCP"
    ports = [p for p in ports if p.protocol == wanted]
    # The EndpointSlice controller names each slice port after the Service port it serves.
    for port in ports:
        if port.name == cluster.port_name:
            return port
    # Hand-written slices may name or number the port after the targetPort instead.
    target = cluster.target_port
    for port in ports:
        if (port.port if isinstance(target, int) else port.name) == target:
            return port
    return None


def not_ready_endpoints(cluster: EdsCluster, slices: Sequence[EndpointSlice]) -> list[str]:
    """The `address:port` of each endpoint of the cluster's port that is not ready (so not
    served), sorted, each once."""
    found: set[str] = set()
    for endpoint_slice in slices:
        if endpoint_slice.address_type == "FQDN":
            continue
        port = served_port(cluster, endpoint_slice.ports)
        if port is None:
            continue
        for endpoint in endpoint_slice.endpoints:
            if not endpoint.ready and endpoint.addresses:
                found.add(f"{endpoint.addresses[0]}:{port.port}")
    return sorted(found)


def not_ready_by_cluster(clusters: Mapping[str, Cluster], store: Store) -> dict[str, list[str]]:
    """Each EDS cluster's (an aggregate's pod-backed child's too) endpoints that are not
    ready, by cluster name; clusters without any left out."""
    slices: dict[tuple[str, str], list[EndpointSlice]] = {}
    for (namespace, _), endpoint_slice in store.endpoint_slices.items():
        if endpoint_slice.service_name:
            slices.setdefault((namespace, endpoint_slice.service_name), []).append(endpoint_slice)
    found: dict[str, list[str]] = {}
    for cluster in clusters.values():
        parts = cluster.children if isinstance(cluster, AggregateCluster) else (cluster,)
        for part in parts:
            if not isinstance(part, EdsCluster):
                continue
            service = (part.service.namespace, part.service.name)
            if waiting := not_ready_endpoints(part, slices.get(service, [])):
                found[part.name] = waiting
    return found
