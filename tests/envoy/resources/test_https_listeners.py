"""HTTPS listeners in Envoy's terms: SNI filter chains naming their certificates over SDS,
Secret resources (sent only to the group using them) that the real Envoy accepts, no
deprecated field, and `dragoman render` never printing a private key."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from dragoman.envoy import translate
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_config
from dragoman.envoy.resources.common_messages import pack
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.snapshot_yaml import REDACTED, render_yaml
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.objects import Secret
from dragoman.snapshots.resources import CLUSTER, LISTENER, ROUTE, SECRET, Snapshot
from tests.support.certificates import certificate_authority
from tests.support.envoy_checks import problems_in
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import GW, build_text, objects

CA = certificate_authority()
SHOP = CA.issue("shop.example.com")
WILD = CA.issue("*.api.example.com")

MANIFESTS = f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: shop, port: 8443, protocol: HTTPS, hostname: shop.example.com,
     tls: {{certificateRefs: [{{name: shop}}]}}}}
  - {{name: api, port: 8443, protocol: HTTPS, hostname: '*.api.example.com',
     tls: {{certificateRefs: [{{name: wild}}]}}}}
  - {{name: fallback, port: 8443, protocol: HTTPS, tls: {{certificateRefs: [{{name: shop}}]}}}}
  - {{name: http, port: 8080, protocol: HTTP}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: shop, namespace: default}}
spec:
  parentRefs: [{{name: edge, sectionName: shop}}, {{name: edge, sectionName: http}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: api, namespace: default}}
spec:
  parentRefs: [{{name: edge, sectionName: api}}]
  hostnames: [v1.api.example.com]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
{SHOP.secret_yaml("shop")}
---
{WILD.secret_yaml("wild")}
"""


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return translate(build_text(MANIFESTS))["default/edge"]


def https_listener(snapshot: Snapshot) -> listener_pb2.Listener:
    [found] = [m for m in messages(snapshot, LISTENER) if m.name == "https-8443"]
    return found


def test_one_filter_chain_per_listener_hostname(snapshot: Snapshot) -> None:
    value = https_listener(snapshot)
    assert [f.name for f in value.listener_filters] == ["envoy.filters.listener.tls_inspector"]
    chains = [
        (list(chain.filter_chain_match.server_names), chain.name) for chain in value.filter_chains
    ]
    assert chains == [
        (["shop.example.com"], "https-8443/shop.example.com"),
        (["*.api.example.com"], "https-8443/*.api.example.com"),
        ([], "https-8443"),
    ]
    for chain in value.filter_chains:
        context = tls_pb2.DownstreamTlsContext()
        assert chain.transport_socket.typed_config.Unpack(context)
        assert list(context.common_tls_context.alpn_protocols) == ["h2", "http/1.1"]
        # No key in the Listener: the certificate is named, and fetched over ADS.
        assert not context.common_tls_context.tls_certificates
        [sds] = context.common_tls_context.tls_certificate_sds_secret_configs
        assert sds.name == (
            "default/wild" if chain.name.endswith("api.example.com") else "default/shop"
        )
        assert sds.sds_config.WhichOneof("config_source_specifier") == "ads"
        assert b"PRIVATE KEY" not in chain.SerializeToString()
        manager = hcm_pb2.HttpConnectionManager()
        assert chain.filters[0].typed_config.Unpack(manager)
        assert manager.rds.route_config_name == chain.name


def test_secrets_carry_the_certificates_and_keys(snapshot: Snapshot) -> None:
    secrets = {m.name: m for m in messages(snapshot, SECRET)}
    assert sorted(secrets) == ["default/shop", "default/wild"]
    for name, pem in (("default/shop", SHOP), ("default/wild", WILD)):
        certificate = secrets[name].tls_certificate
        assert certificate.certificate_chain.inline_bytes == pem.certificate
        assert certificate.private_key.inline_bytes == pem.private_key


def test_only_groups_whose_listeners_use_a_secret_receive_it() -> None:
    other = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: plain, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, port: 9090, protocol: HTTP}]
"""
    snapshots = translate(build_text(MANIFESTS + "\n---\n" + other))
    assert snapshots["default/plain"].of_type(SECRET).names == frozenset()
    assert snapshots["default/edge"].of_type(SECRET).names == {"default/shop", "default/wild"}


def test_each_chain_routes_only_its_listener_and_answers_421_for_other_hosts(
    snapshot: Snapshot,
) -> None:
    tables = {t.name: t for t in messages(snapshot, ROUTE)}

    def answers(table: str) -> dict[str, str | int]:
        return {
            vhost.domains[0]: route.direct_response.status or route.route.cluster
            for vhost in tables[table].virtual_hosts
            for route in vhost.routes
        }

    assert answers("https-8443/shop.example.com") == {
        "shop.example.com": "default/web/80",
        "*.api.example.com": 421,
        "*": 421,
    }
    assert answers("https-8443/*.api.example.com") == {
        "v1.api.example.com": "default/web/80",
        "shop.example.com": 421,
        "*": 421,
    }
    fallback = tables["https-8443"]
    # No route attached to the catch-all listener: the other listeners' hosts answer 421.
    assert all(r.direct_response.status == 421 for v in fallback.virtual_hosts for r in v.routes)


def inline_copies(
    listener: listener_pb2.Listener, tables: dict[str, route_pb2.RouteConfiguration], offset: int
) -> listener_pb2.Listener:
    """A copy on another port whose every chain carries its routes inline."""
    copy = listener_pb2.Listener()
    copy.CopyFrom(listener)
    copy.name = listener.name + "/inline"
    copy.address.socket_address.port_value += offset
    for chain in copy.filter_chains:
        manager = hcm_pb2.HttpConnectionManager()
        assert chain.filters[0].typed_config.Unpack(manager)
        manager.route_config.CopyFrom(tables[manager.rds.route_config_name])
        chain.filters[0].typed_config.CopyFrom(pack(manager))
    return copy


def test_envoy_accepts_the_https_listener(snapshot: Snapshot, tmp_path: Path) -> None:
    tables = {t.name: t for t in messages(snapshot, ROUTE)}
    listeners = messages(snapshot, LISTENER)
    config: dict[str, Any] = bootstrap_config(
        "127.0.0.1:18000",
        node_id="validate",
        node_cluster="default/edge",
        admin_socket=str(tmp_path / "admin.sock"),
    )
    static = config["static_resources"]
    static["clusters"] += [to_json_mapping(c) for c in messages(snapshot, CLUSTER)]
    static["listeners"] = [to_json_mapping(m) for m in listeners] + [
        to_json_mapping(inline_copies(m, tables, 10000)) for m in listeners
    ]
    # The Secrets as Envoy would receive them over SDS, checked by the same validation.
    static["secrets"] = [to_json_mapping(m) for m in messages(snapshot, SECRET)]
    path = tmp_path / "https.yaml"
    path.write_text(dump_yaml(config))
    result = subprocess.run(
        [envoy_binary(), "--mode", "validate", "--disable-hot-restart", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "deprecated" not in output.lower(), output


def test_nothing_deprecated_in_https_listeners(snapshot: Snapshot) -> None:
    for message in messages(snapshot, LISTENER) + messages(snapshot, ROUTE):
        assert list(problems_in(message, message.name)) == []


def test_render_redacts_private_keys(snapshot: Snapshot) -> None:
    text = render_yaml({"default/edge": snapshot})
    for pem in (SHOP, WILD):
        assert base64.b64encode(pem.private_key).decode() not in text
        assert base64.b64encode(pem.certificate).decode() in text  # certificates are public
    # Each key once, in its Secret: none in the listeners.
    assert text.count(f"private_key: '{REDACTED}'") == 2
    assert "PRIVATE KEY" not in text


def test_reprs_never_show_key_material() -> None:
    dag = build_text(MANIFESTS)
    assert "PRIVATE KEY" not in repr(dag)
    secrets = [obj for obj in objects(MANIFESTS) if isinstance(obj, Secret)]
    assert len(secrets) == 2
    assert all("PRIVATE KEY" not in repr(secret) for secret in secrets)
