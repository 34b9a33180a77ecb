"""ClusterLoadAssignments: EDS ones from LoadAssignment values, inline ones for single hosts."""

from __future__ import annotations

from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2

from dragoman.dag.model import LoadAssignment, Locality

# Messages are filled in place: built apart and passed to a constructor, every nested message
# would be copied once per level (a CLA build is three times faster this way).


def _fill_lb_endpoint(
    message: endpoint_components_pb2.LbEndpoint,
    host: str,
    port: int,
    hostname: str,
    additional: tuple[str, ...] = (),
) -> None:
    """One upstream host; `hostname` is what auto_host_rewrite and auto SNI use; `additional`
    the host's other addresses, which Envoy races with the first (Happy Eyeballs)."""
    endpoint = message.endpoint
    address = endpoint.address.socket_address  # protocol: TCP, the default
    address.address = host
    address.port_value = port
    if hostname:
        endpoint.hostname = hostname
    for other in additional:
        more = endpoint.additional_addresses.add().address.socket_address
        more.address = other
        more.port_value = port


def _fill_locality(
    message: endpoint_components_pb2.LocalityLbEndpoints, locality: Locality
) -> None:
    # Always present, empty without a zone: gRPC clients reject a CLA whose locality is
    # unset ("field not present") and make the channel UNAVAILABLE; Envoy accepts both.
    message.locality.zone = locality.zone
    # Always set: gRPC clients ignore localities without a weight.
    message.load_balancing_weight.value = locality.weight
    add = message.lb_endpoints.add
    for e in locality.endpoints:
        _fill_lb_endpoint(add(), e.address, e.port, e.hostname, e.additional_addresses)


def cluster_load_assignment(assignment: LoadAssignment) -> endpoint_pb2.ClusterLoadAssignment:
    # The DAG already sorts localities and endpoints: keep its order for stable bytes.
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=assignment.cluster)
    add = message.endpoints.add
    for locality in assignment.localities:
        _fill_locality(add(), locality)
    return message


def single_host_assignment(
    cluster_name: str, hostname: str, port: int, *, absolute: bool = False
) -> endpoint_pb2.ClusterLoadAssignment:
    """The inline endpoint a DNS cluster resolves; hostname set so auto_host_rewrite uses it.

    With `absolute`, the address resolved ends in a dot: no resolver search list (a pod's
    `<ns>.svc.cluster.local`) is ever appended, so an external `web.other` can never turn
    into another namespace's Service.
    """
    message = endpoint_pb2.ClusterLoadAssignment()
    fill_single_host_assignment(message, cluster_name, hostname, port, absolute=absolute)
    return message


def fill_single_host_assignment(
    message: endpoint_pb2.ClusterLoadAssignment,
    cluster_name: str,
    hostname: str,
    port: int,
    *,
    absolute: bool = False,
) -> None:
    """single_host_assignment into `message` (an empty one, such as a cluster's own)."""
    address = hostname.rstrip(".") + "." if absolute else hostname
    message.cluster_name = cluster_name
    _fill_lb_endpoint(message.endpoints.add().lb_endpoints.add(), address, port, hostname)
