"""The counts behind /metrics and /debug: external names by state (the DNS check's results
included) and clients by kind."""

from __future__ import annotations

import textwrap

from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.external_name_policy import ExternalNamePolicy, domain_rule
from dragoman.dag.options import BuildOptions
from dragoman.objects import ObjectKey
from dragoman.runtime.summary import client_counts, external_name_states
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.status_builds import objects

NAMES = {
    "good": "api.example.com",
    "gone": "ghost.example.com",
    "private": "intranet.example.com",
    "denied": "evil.example.net",
    "local": "localhost",
}


def manifests() -> str:
    services = "".join(
        f"""
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec: {{type: ExternalName, externalName: {host}, ports: [{{port: 443}}]}}
"""
        for name, host in NAMES.items()
    )
    rules = "".join(f"\n    - backendRefs: [{{name: {name}, port: 443}}]" for name in NAMES)
    return textwrap.dedent(
        """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:"""
        + rules
        + services
    )


def test_external_names_by_state_with_the_dns_check() -> None:
    store = Store.from_objects(objects(manifests()))
    options = BuildOptions(
        dns_check=True,
        external_names=ExternalNamePolicy(
            denied_domains=(domain_rule("example.net"),),
        ),
    )
    dns = {
        "api.example.com": DnsObservation(("203.0.113.5",)),
        "ghost.example.com": DnsObservation(error="NXDOMAIN"),
        "intranet.example.com": DnsObservation(("127.0.0.9",)),
    }
    dag = build(store, options, dns)
    states = external_name_states(store, dag, options, dns)
    assert {key.name: state for key, state in states.items()} == {
        "good": "served",
        "gone": "dns_failed",
        "private": "refused",  # resolves to loopback: always denied
        "denied": "refused",  # the policy's denied domain
        "local": "refused",  # localhost, refused by name
    }
    assert ObjectKey("Service", "default", "good") in states


def test_clients_are_counted_once_per_node_and_connection_by_kind() -> None:
    registry = StreamRegistry()

    def connect(node: Node, peer: str, service: str = "ADS") -> None:
        protocol = SotwStream()
        protocol.node = node
        stream = registry.open(service, peer, protocol)
        stream.identified, stream.node_id = True, node.id

    envoy = Node(id="envoy-1", user_agent_name="envoy")
    for service in ("CDS", "EDS", "LDS", "RDS"):  # one Envoy, four per-type streams
        connect(envoy, "ipv4:10.0.0.1:5000", service)
    connect(Node(id="envoy-2", user_agent_name="envoy"), "ipv4:10.0.0.2:5000")
    connect(Node(id="client", user_agent_name="gRPC Python"), "ipv4:10.0.0.3:6000")
    registry.open("ADS", "ipv4:10.0.0.4:7000", SotwStream())  # not identified yet
    assert client_counts(registry.streams()) == {"envoy": 2, "grpc": 1}


def test_parse_object_is_what_the_summary_reads() -> None:
    service = parse_object(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "envoy", "namespace": "edge"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}, "junk", {}]}},
        }
    )
    assert service.load_balancer_ingress == ("198.51.100.1",)
