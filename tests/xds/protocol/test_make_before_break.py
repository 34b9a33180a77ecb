"""Make before break, decided once for both protocols: routes settle when the client ACKed
the current listeners and every route they fetch."""

from __future__ import annotations

import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.make_before_break import endpoints_to_resend, routes_settled
from dragoman.xds.protocol.sotw_stream import SotwStream
from tests.support.xds_builders import (
    ack,
    delta_ack,
    delta_request,
    dns_cluster,
    eds_cluster,
    listener,
    request,
    routes,
    snapshot,
)

NODE = Node(id="envoy-1")


def served() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a")],
    )


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_routes_settle_once_the_listener_and_its_routes_are_acked(delta: bool) -> None:
    snap = served()
    stream: SotwStream | DeltaStream = DeltaStream() if delta else SotwStream()

    def settled() -> bool:
        return routes_settled(stream.types, snap)

    assert settled()  # fetches no routes: nothing to wait for
    if isinstance(stream, DeltaStream):
        (lds,) = stream.on_request(delta_request(LISTENER, node=NODE), snap)
        (rds,) = stream.on_request(delta_request(ROUTE, ["routes-http"]), snap)
        assert not settled()  # both in flight
        stream.on_request(delta_ack(lds), snap)
        assert not settled()  # the routes the listener fetches are not ACKed yet
        stream.on_request(delta_ack(rds), snap)
    else:
        (lds,) = stream.on_request(request(LISTENER, node=NODE), snap)
        (rds,) = stream.on_request(request(ROUTE, ["routes-http"]), snap)
        assert not settled()
        stream.on_request(ack(lds), snap)
        assert not settled()
        stream.on_request(ack(rds, ["routes-http"]), snap)
    assert settled()


def test_only_changed_eds_clusters_a_client_subscribes_to_have_their_cla_resent() -> None:
    stream = SotwStream()
    snap = snapshot(clusters=[eds_cluster("a", "svc-a"), eds_cluster("b")])
    stream.on_request(request(CLUSTER, node=NODE), snap)
    stream.on_request(request(ENDPOINT, ["svc-a"]), snap)
    clusters = [eds_cluster("a", "svc-a"), eds_cluster("b"), dns_cluster("ext", "example.com")]
    resent = endpoints_to_resend(clusters, stream.types[ENDPOINT])
    assert resent == ["svc-a"]  # "b" not subscribed, "ext" has no CLA
