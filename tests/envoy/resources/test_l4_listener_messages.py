"""TCP, TLS and UDP listeners as Envoy receives them: the TCP proxy (weighted clusters, the
share of an invalid backend refused), SNI filter chains behind the TLS inspector (TLS
terminated only in Terminate mode), the UDP proxy on a UDP socket; and proxyless gRPC clients
never see any of them."""

from __future__ import annotations

from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import route_pb2 as udp_route_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import udp_proxy_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.resources.l4_listener_messages import NO_BACKEND
from dragoman.snapshots.resources import CLUSTER, LISTENER, SECRET
from tests.support.certificates import certificate_authority
from tests.support.proxyless import decoded, grpc_snapshot, serving
from tests.support.status_builds import DRAGOMAN_CLASS, build_text

CERT = certificate_authority().issue("db.example.com")

MANIFESTS = f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: http, protocol: HTTP, port: 8080}}
  - {{name: db, protocol: TCP, port: 5432}}
  - {{name: logs, protocol: UDP, port: 514}}
  - {{name: partners, protocol: TLS, port: 8443, hostname: "*.partner.example",
     tls: {{mode: Passthrough}}}}
  - {{name: db-tls, protocol: TLS, port: 8443, hostname: db.example.com,
     tls: {{mode: Terminate, certificateRefs: [{{name: cert}}]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: default}}
spec: {{type: ExternalName, externalName: db.partner.example, ports: [{{port: 5432}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: replica, namespace: default}}
spec: {{type: ExternalName, externalName: replica.partner.example, ports: [{{port: 5432}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: logs, namespace: default}}
spec:
  type: ExternalName
  externalName: logs.partner.example
  ports: [{{port: 514, protocol: UDP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: http}}]
  hostnames: [web.example.com]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {{name: db, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: db}}]
  rules:
  - backendRefs:
    - {{name: db, port: 5432, weight: 3}}
    - {{name: replica, port: 5432, weight: 1}}
    - {{name: gone, port: 5432, weight: 1}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {{name: logs, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: logs}}]
  rules: [{{backendRefs: [{{name: logs, port: 514}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: partner, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: partners}}]
  hostnames: [api.partner.example]
  rules: [{{backendRefs: [{{name: db, port: 5432}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: db-tls, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: db-tls}}]
  hostnames: [db.example.com]
  rules: [{{backendRefs: [{{name: replica, port: 5432}}]}}]
---
{CERT.secret_yaml("cert")}
"""


def snapshot():  # type: ignore[no-untyped-def]
    dag = build_text(DRAGOMAN_CLASS, MANIFESTS)
    return translate(dag)[""]


def listener(name: str) -> listener_pb2.Listener:
    message = decoded(snapshot(), LISTENER, name)
    assert isinstance(message, listener_pb2.Listener)
    return message


def test_tcp_proxy_weighs_clusters_and_refuses_the_invalid_share() -> None:
    message = listener("tcp-5432")
    [chain] = message.filter_chains
    [network] = chain.filters
    proxy = tcp_proxy_pb2.TcpProxy()
    assert network.typed_config.Unpack(proxy)
    weights = {c.name: c.weight for c in proxy.weighted_clusters.clusters}
    assert weights == {"default/db/5432/tcp": 3, "default/replica/5432/tcp": 1, NO_BACKEND: 1}
    clusters = set(snapshot().of_type(CLUSTER).resources)
    assert NO_BACKEND not in clusters  # Envoy closes those connections: no such cluster
    assert {"default/db/5432/tcp", "default/replica/5432/tcp"} <= clusters
    assert not message.listener_filters  # no SNI to read on a TCP port


def test_tls_port_matches_sni_and_terminates_only_in_terminate_mode() -> None:
    message = listener("tls-8443")
    assert [f.name for f in message.listener_filters] == ["envoy.filters.listener.tls_inspector"]
    chains = {tuple(c.filter_chain_match.server_names): c for c in message.filter_chains}
    assert set(chains) == {("api.partner.example",), ("db.example.com",)}
    assert not chains["api.partner.example",].HasField("transport_socket")
    context = tls_pb2.DownstreamTlsContext()
    assert chains["db.example.com",].transport_socket.typed_config.Unpack(context)
    # The certificate by SDS name; the Secret resource holds it, for this group.
    assert not context.common_tls_context.tls_certificates
    [sds] = context.common_tls_context.tls_certificate_sds_secret_configs
    secret = decoded(snapshot(), SECRET, sds.name)
    assert secret.tls_certificate.certificate_chain.inline_bytes == CERT.certificate  # type: ignore[attr-defined]


def test_passthrough_cluster_originates_no_tls() -> None:
    # An ExternalName port 443 would get TLS for HTTP; for whole connections only a
    # BackendTLSPolicy can ask for it, and a passthrough connection is the client's TLS.
    cluster = decoded(snapshot(), CLUSTER, "default/db/5432/tcp")
    assert not cluster.HasField("transport_socket")  # type: ignore[attr-defined]
    assert not cluster.typed_extension_protocol_options  # type: ignore[attr-defined]


def test_udp_proxy_listens_on_a_udp_socket() -> None:
    message = listener("udp-514")
    assert message.address.socket_address.protocol == address_pb2.SocketAddress.UDP
    assert message.HasField("udp_listener_config")
    [udp] = message.listener_filters
    config = udp_proxy_pb2.UdpProxyConfig()
    assert udp.typed_config.Unpack(config)
    route = udp_route_pb2.Route()
    assert config.matcher.on_no_match.action.typed_config.Unpack(route)
    assert route.cluster == "default/logs/514/udp"
    assert not message.filter_chains


def test_proxyless_grpc_clients_see_no_tcp_tls_or_udp_listener() -> None:
    _, cache = serving(DRAGOMAN_CLASS, MANIFESTS)
    grpc = grpc_snapshot(cache)
    names = set(grpc.of_type(LISTENER).resources)
    assert "web.example.com:8080" in names  # the HTTP route is there
    # Service names are targets as ever (a TCP Service port may well speak gRPC); what a
    # Gateway serves on its TCP, TLS and UDP ports is not.
    gateway_targets = {name for name in names if ".svc.cluster.local:" not in name}
    assert gateway_targets == {"web.example.com:8080"}
    assert not any(name.endswith(":514") for name in names)  # UDP
    assert not any(name.endswith(("/tcp", "/udp")) for name in grpc.of_type(CLUSTER).resources)


def test_connections_and_sessions_are_access_logged_without_http_fields() -> None:
    dag = build_text(DRAGOMAN_CLASS, MANIFESTS)
    logs = {}
    for log_format in ("json", "off"):
        snapshot = translate(dag, TranslateOptions(access_log=log_format))[""]
        proxy = tcp_proxy_pb2.TcpProxy()
        tcp = listener_of(snapshot, "tcp-5432")
        assert tcp.filter_chains[0].filters[0].typed_config.Unpack(proxy)
        udp = udp_proxy_pb2.UdpProxyConfig()
        assert listener_of(snapshot, "udp-514").listener_filters[0].typed_config.Unpack(udp)
        logs[log_format] = (list(proxy.access_log), list(udp.access_log))
    assert logs["off"] == ([], [])
    tcp_logs, udp_logs = logs["json"]
    for log in (*tcp_logs, *udp_logs):
        stdout = stream_pb2.StdoutAccessLog()
        assert log.typed_config.Unpack(stdout)
        fields = set(stdout.log_format.json_format.fields)
        assert {"upstream_cluster", "requested_server_name", "bytes_sent"} <= fields
        assert not fields & {"path", "method", "response_code"}
    assert len(tcp_logs) == len(udp_logs) == 1


def listener_of(snapshot, name: str) -> listener_pb2.Listener:  # type: ignore[no-untyped-def]
    message = decoded(snapshot, LISTENER, name)
    assert isinstance(message, listener_pb2.Listener)
    return message
