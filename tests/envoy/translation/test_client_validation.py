"""Client certificate validation (a Gateway's spec.tls.frontend) in Envoy's terms: the
DownstreamTlsContext requires a certificate (AllowValidOnly) or asks for one and accepts any
(AllowInsecureFallback), and names its CA certificates over SDS: they travel in a Secret
resource, never inline in a Listener. The full and incremental translations agree, per-type
clients get the SDS config they can fetch, and the real Envoy accepts it all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2

from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.resources.config_sources import per_type_config_source
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.snapshot_yaml import render_yaml
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.envoy.translation.translator import Translation
from dragoman.snapshots.resources import LISTENER, SECRET, Snapshot
from tests.support.certificates import certificate_authority
from tests.support.envoy_checks import problems_in, translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import GW, build_text

SERVER = certificate_authority("server CA").issue("shop.example.com", "tcp.example.com")
CLIENTS = certificate_authority("client CA")
PARTNERS = certificate_authority("partner CA")


def manifests(mode: str = "AllowValidOnly") -> str:
    return f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  gatewayClassName: dragoman
  tls:
    frontend:
      default:
        validation:
          mode: {mode}
          caCertificateRefs: [{{group: '', kind: ConfigMap, name: clients}}]
      perPort:
      - port: 9443
        tls: {{validation: {{caCertificateRefs: [{{group: '', kind: Secret, name: partners}}]}}}}
  listeners:
  - {{name: shop, port: 8443, protocol: HTTPS, hostname: shop.example.com,
     tls: {{certificateRefs: [{{name: server}}]}}}}
  - {{name: tcp, port: 9443, protocol: TLS, hostname: tcp.example.com,
     tls: {{mode: Terminate, certificateRefs: [{{name: server}}]}}}}
  - {{name: http, port: 8080, protocol: HTTP}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80}}, {{name: raw, port: 3000, protocol: TCP}}]
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: shop, namespace: default}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
apiVersion: {GW}
kind: TLSRoute
metadata: {{name: tcp, namespace: default}}
spec:
  parentRefs: [{{name: edge, sectionName: tcp}}]
  hostnames: [tcp.example.com]
  rules: [{{backendRefs: [{{name: web, port: 3000}}]}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: clients, namespace: default}}
data:
  ca.crt: |
{_indented(CLIENTS.pem)}
---
apiVersion: v1
kind: Secret
metadata: {{name: partners, namespace: default}}
stringData:
  ca.crt: |
{_indented(PARTNERS.pem)}
---
{SERVER.secret_yaml("server")}
"""


def _indented(pem: bytes) -> str:
    return "\n".join("    " + line for line in pem.decode().splitlines())


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return translate(build_text(manifests()))["default/edge"]


def listener_named(snapshot: Snapshot, name: str) -> listener_pb2.Listener:
    [found] = [m for m in messages(snapshot, LISTENER) if m.name == name]
    return found


def tls_context(chain: listener_pb2.FilterChain) -> tls_pb2.DownstreamTlsContext:
    context = tls_pb2.DownstreamTlsContext()
    assert chain.transport_socket.typed_config.Unpack(context)
    return context


def test_https_listener_requires_a_client_certificate(snapshot: Snapshot) -> None:
    [chain] = listener_named(snapshot, "https-8443").filter_chains
    context = tls_context(chain)
    assert context.require_client_certificate.value is True
    common = context.common_tls_context
    assert not common.HasField("validation_context")  # never inline
    sds = common.validation_context_sds_secret_config
    assert sds.name == "client-ca/default/edge/8443"
    assert sds.sds_config.WhichOneof("config_source_specifier") == "ads"
    [certificate] = common.tls_certificate_sds_secret_configs
    assert certificate.name == "default/server"


def test_tls_terminate_listener_uses_its_ports_configuration(snapshot: Snapshot) -> None:
    [chain] = listener_named(snapshot, "tls-9443").filter_chains
    context = tls_context(chain)
    assert context.require_client_certificate.value is True
    sds = context.common_tls_context.validation_context_sds_secret_config
    assert sds.name == "client-ca/default/edge/9443"


def test_ca_certificates_travel_as_secrets_only(snapshot: Snapshot) -> None:
    secrets = {m.name: m for m in messages(snapshot, SECRET)}
    assert sorted(secrets) == [
        "client-ca/default/edge/8443",
        "client-ca/default/edge/9443",
        "default/server",
    ]
    default = secrets["client-ca/default/edge/8443"].validation_context
    assert default.trusted_ca.inline_bytes == CLIENTS.pem
    assert (
        default.trust_chain_verification
        == common_pb2.CertificateValidationContext.VERIFY_TRUST_CHAIN
    )
    assert secrets["client-ca/default/edge/9443"].validation_context.trusted_ca.inline_bytes == (
        PARTNERS.pem
    )
    for message in messages(snapshot, LISTENER):
        body = message.SerializeToString()
        assert CLIENTS.pem not in body and PARTNERS.pem not in body
        assert b"BEGIN CERTIFICATE" not in body


def test_plain_http_listener_asks_nothing(snapshot: Snapshot) -> None:
    [chain] = listener_named(snapshot, "http-8080").filter_chains
    assert not chain.HasField("transport_socket")


def test_insecure_fallback_asks_for_a_certificate_but_accepts_any() -> None:
    found = translate(build_text(manifests("AllowInsecureFallback")))["default/edge"]
    [chain] = listener_named(found, "https-8443").filter_chains
    context = tls_context(chain)
    assert context.HasField("require_client_certificate")
    assert context.require_client_certificate.value is False
    combined = context.common_tls_context.combined_validation_context
    assert combined.default_validation_context.trust_chain_verification == (
        common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED
    )
    assert combined.validation_context_sds_secret_config.name == "client-ca/default/edge/8443"
    # The per-port configuration keeps its own mode.
    [tls_chain] = listener_named(found, "tls-9443").filter_chains
    assert tls_context(tls_chain).require_client_certificate.value is True


@pytest.mark.parametrize("mode", ["AllowValidOnly", "AllowInsecureFallback"])
def test_incremental_translation_agrees(mode: str) -> None:
    dag = build_text(manifests(mode))
    full = translate(dag)
    # From the other mode's translation: what changes is made anew, the rest reused.
    other = "AllowInsecureFallback" if mode == "AllowValidOnly" else "AllowValidOnly"
    translation = Translation()
    translation.translate(build_text(manifests(other)))
    incremental = translation.translate(dag)
    for type_url in (LISTENER, SECRET):
        assert incremental["default/edge"].of_type(type_url).version == (
            full["default/edge"].of_type(type_url).version
        )


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
@pytest.mark.parametrize("mode", ["AllowValidOnly", "AllowInsecureFallback"])
def test_per_type_clients_fetch_the_validation_context_on_their_streams(
    mode: str, delta: bool
) -> None:
    dag = build_text(manifests(mode))
    original = translate(dag)["default/edge"]
    per_type = PerTypeConfigSources("xds").per_type(original, delta=delta)
    source = per_type_config_source(delta=delta, cluster_name="xds")
    checked = 0
    for message in messages(per_type, LISTENER):
        for chain in message.filter_chains:
            if not chain.HasField("transport_socket"):
                continue
            common = tls_context(chain).common_tls_context
            sds = (
                common.combined_validation_context.validation_context_sds_secret_config
                if common.HasField("combined_validation_context")
                else common.validation_context_sds_secret_config
            )
            assert sds.name.startswith("client-ca/")
            assert sds.sds_config == source
            checked += 1
    assert checked == 2
    # The variant is what translation with the per-type config source makes.
    kind = "per-type-delta" if delta else "per-type"
    options = TranslateOptions(config_sources=kind, xds_cluster_name="xds")
    direct = translate(dag, options)["default/edge"]
    assert per_type.of_type(LISTENER).version == direct.of_type(LISTENER).version


def test_nothing_deprecated(snapshot: Snapshot) -> None:
    for message in messages(snapshot, LISTENER) + messages(snapshot, SECRET):
        assert list(problems_in(message, message.name)) == []


def test_render_shows_the_validation_and_the_ca() -> None:
    text = render_yaml(
        {"default/edge": translate(build_text(manifests("AllowInsecureFallback")))["default/edge"]}
    )
    assert "require_client_certificate: false" in text
    assert "ACCEPT_UNTRUSTED" in text
    assert "client-ca/default/edge/8443" in text
    assert "PRIVATE KEY" not in text


@pytest.mark.parametrize("mode", ["AllowValidOnly", "AllowInsecureFallback"])
def test_envoy_accepts_it(mode: str, tmp_path: Path) -> None:
    found = translate(build_text(manifests(mode)))["default/edge"]
    config: dict[str, Any] = translated_bootstrap(found, tmp_path / "admin.sock")
    # The Secrets as Envoy would receive them over SDS, checked by the same validation.
    config["static_resources"]["secrets"] = [to_json_mapping(m) for m in messages(found, SECRET)]
    path = tmp_path / "validation.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy_binary(), path)
