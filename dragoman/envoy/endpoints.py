"""ClusterLoadAssignments: EDS ones from LoadAssignment values, inline ones for single hosts."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from google.protobuf.wrappers_pb2 import UInt32Value

from dragoman.dag.model import LoadAssignment, Locality
from dragoman.envoy.core import socket_address


def lb_endpoint(host: str, port: int, hostname: str = "") -> endpoint_components_pb2.LbEndpoint:
    """One upstream host; `hostname` is what auto_host_rewrite and auto SNI use."""
    return endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=socket_address(host, port), hostname=hostname
        )
    )


def locality_endpoints(locality: Locality) -> endpoint_components_pb2.LocalityLbEndpoints:
    return endpoint_components_pb2.LocalityLbEndpoints(
        # Always present, empty without a zone: gRPC clients reject a CLA whose locality is
        # unset ("field not present") and make the channel UNAVAILABLE; Envoy accepts both.
        locality=base_pb2.Locality(zone=locality.zone),
        # Always set: gRPC clients ignore localities without a weight.
        load_balancing_weight=UInt32Value(value=locality.weight),
        lb_endpoints=[lb_endpoint(e.address, e.port, e.hostname) for e in locality.endpoints],
    )


def cluster_load_assignment(assignment: LoadAssignment) -> endpoint_pb2.ClusterLoadAssignment:
    # The DAG already sorts localities and endpoints: keep its order for stable bytes.
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=assignment.cluster,
        endpoints=[locality_endpoints(locality) for locality in assignment.localities],
    )


def single_host_assignment(
    cluster_name: str, hostname: str, port: int, *, absolute: bool = False
) -> endpoint_pb2.ClusterLoadAssignment:
    """The inline endpoint a DNS cluster resolves; hostname set so auto_host_rewrite uses it.

    With `absolute`, the address resolved ends in a dot: no resolver search list (a pod's
    `<ns>.svc.cluster.local`) is ever appended, so an external `web.other` can never turn
    into another namespace's Service.
    """
    address = hostname.rstrip(".") + "." if absolute else hostname
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=cluster_name,
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[lb_endpoint(address, port, hostname=hostname)]
            )
        ],
    )
