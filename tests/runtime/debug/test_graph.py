"""The /debug graph draws TCP, TLS and UDP listeners too: each with the routes it serves
(a TLS route with its SNI) and the Services and clusters they send to."""

from __future__ import annotations

from dragoman.runtime.debug.graph import LISTENER, ROUTE, build_graph
from dragoman.runtime.debug.view import DebugView
from tests.support.feature_manifests import every_feature_dag


def test_tcp_tls_and_udp_listeners_lead_to_their_routes_and_clusters() -> None:
    graph = build_graph(DebugView(dag=every_feature_dag()))
    labels = {node.label for node in graph.nodes.values() if node.column == LISTENER}
    assert {"tcp-9000 (tcp, port 9000)", "udp-9000 (udp, port 9000)"} <= labels
    assert "tls-8443 (tcp, port 8443)" in labels
    tcp = "listener default/edge tcp-9000"
    assert (tcp, "TCPRoute/default/database") in graph.edges
    assert ("TCPRoute/default/database", "Service/default/database") in graph.edges
    assert ("Service/default/database", "default/database/5432/tcp") in graph.edges
    assert ("listener default/edge udp-9000", "UDPRoute/default/logs") in graph.edges
    partner = graph.nodes["TLSRoute/default/partner"]
    assert partner.column == ROUTE
    assert "SNI: *.partner.example, api.partner.example" in partner.details
