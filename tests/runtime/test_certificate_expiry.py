"""The expiry of every certificate dragoman serves or uses, as metrics: read when the
certificate was checked (never parsed again), the xDS files' as the next handshake uses them."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from dragoman.dag.model import Dag
from dragoman.runtime.certificate_expiry import (
    BACKEND_CA,
    BACKEND_CLIENT,
    GATEWAY_CLIENT_CA,
    GATEWAY_LISTENER,
    XDS_CLIENT_CA,
    XDS_SERVER,
    CertificateExpiry,
    dag_expiries,
    xds_expiries,
)
from dragoman.runtime.metrics import Metrics
from dragoman.security.certgen import Pair, client_pair, new_authority, server_pair
from dragoman.security.files import TlsFiles
from dragoman.xds.transport.credentials import RotatingServerCredentials
from tests.support.builders import (
    backend_ref,
    backend_tls_policy,
    config_map,
    external_service,
    gateway,
    gateway_class,
    http_route,
    listener,
    local_ref,
    parent_ref,
    rule,
    secret,
    tls_secret,
    xbackend,
    xbackend_ref,
)
from tests.support.status_builds import build_text

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
AUTHORITY = new_authority("expiry CA", days=400, now=NOW)
SITE = server_pair(AUTHORITY, ["site.example.com"], days=30, now=NOW)
CLIENT = client_pair(AUTHORITY, "client", "spiffe://example.com/gateway", days=20, now=NOW)
# Two CAs a Gateway validates its clients with: the bundle expires with the first.
CLIENT_CAS = [new_authority(f"clients {days}", days=days, now=NOW) for days in (90, 60)]
# The CAs a BackendTLSPolicy validates its backend with, from a ConfigMap and a Secret.
BACKEND_CAS = [new_authority(f"backend {days}", days=days, now=NOW) for days in (80, 70)]


def expires(pair: Pair | bytes) -> float:
    pem = pair.certificate if isinstance(pair, Pair) else pair
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()


def served_dag() -> Dag:
    https = listener("https", 443, "HTTPS", tls={"certificateRefs": [{"name": "site"}]})
    presenting = {"backend": {"clientCertificateRef": {"kind": "Secret", "name": "client"}}}
    refs = [
        {"group": "", "kind": "ConfigMap", "name": f"ca-{index}"}
        for index in range(len(CLIENT_CAS))
    ]
    validating = {"frontend": {"default": {"validation": {"caCertificateRefs": refs}}}}
    return build_text(
        gateway_class(),
        gateway("gw", listeners=[https], tls={**presenting, **validating}),
        *(
            config_map(f"ca-{index}", {"ca.crt": ca.pair.certificate.decode()})
            for index, ca in enumerate(CLIENT_CAS)
        ),
        gateway("other", listeners=[https]),  # the same Secret again: one series
        tls_secret("site", SITE.certificate, SITE.private_key),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key),
        external_service("partner", "api.partner.example", 443),
        http_route("r", rules=[rule(backend_ref("partner", 443))], parents=[parent_ref("gw")]),
        backend_tls_policy(
            "partner-tls",
            "partner",
            "api.partner.example",
            ca_refs=[local_ref("ConfigMap", "backend-ca"), local_ref("Secret", "backend-ca")],
        ),
        config_map("backend-ca", {"ca.crt": BACKEND_CAS[0].pair.certificate.decode()}),
        secret("backend-ca", {"ca.crt": BACKEND_CAS[1].pair.certificate}),
    )


def test_the_dag_carries_each_served_certificate_expiry_without_parsing_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dag = served_dag()
    wanted = [
        CertificateExpiry(
            BACKEND_CA, "BackendTLSPolicy/default/partner-tls", expires(BACKEND_CAS[1].pair)
        ),
        CertificateExpiry(BACKEND_CLIENT, "default/client", expires(CLIENT)),
        CertificateExpiry(GATEWAY_CLIENT_CA, "default/gw/443", expires(CLIENT_CAS[1].pair)),
        CertificateExpiry(GATEWAY_LISTENER, "default/site", expires(SITE)),
    ]

    def refuse(*_args: object) -> None:
        raise AssertionError("a certificate was parsed again")

    monkeypatch.setattr(x509, "load_pem_x509_certificates", refuse)
    monkeypatch.setattr(x509, "load_pem_x509_certificate", refuse)
    assert dag_expiries(dag) == wanted


def test_a_chain_expires_with_its_first_certificate_to_expire() -> None:
    # An intermediate expiring before the leaf: Envoy's peers refuse the chain from then on.
    chain = SITE.certificate + AUTHORITY.pair.certificate
    short = new_authority("short-lived", days=1, now=NOW).pair.certificate
    dag = build_text(
        gateway_class(),
        gateway(
            "gw",
            listeners=[listener("https", 443, "HTTPS", tls={"certificateRefs": [{"name": "s"}]})],
        ),
        tls_secret("s", chain + short, SITE.private_key),
    )
    assert dag_expiries(dag) == [
        CertificateExpiry(GATEWAY_LISTENER, "default/s", expires(short)),
    ]


def test_no_dag_no_certificates() -> None:
    assert dag_expiries(None) == []


def write(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    temporary.rename(path)


def test_rotated_xds_files_are_reported_before_any_handshake_uses_them(tmp_path: Path) -> None:
    files = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt")
    first = server_pair(AUTHORITY, ["localhost"], days=10)
    write(files.certificate, first.certificate)
    write(files.private_key, first.private_key)
    write(files.trusted_ca, AUTHORITY.pair.certificate)
    credentials = RotatingServerCredentials(files)
    subject = AUTHORITY.certificate.subject.rfc4514_string()
    assert xds_expiries(files, credentials.material()) == [
        CertificateExpiry(XDS_SERVER, str(files.certificate), expires(first)),
        CertificateExpiry(XDS_CLIENT_CA, subject, expires(AUTHORITY.pair)),
    ]
    renewed = new_authority("renewed CA", days=500)
    second = server_pair(renewed, ["localhost"], days=60)
    write(files.trusted_ca, renewed.pair.certificate + AUTHORITY.pair.certificate)
    write(files.private_key, second.private_key)
    write(files.certificate, second.certificate)
    assert xds_expiries(files, credentials.material()) == [
        CertificateExpiry(XDS_SERVER, str(files.certificate), expires(second)),
        CertificateExpiry(
            XDS_CLIENT_CA, renewed.certificate.subject.rfc4514_string(), expires(renewed.pair)
        ),
        CertificateExpiry(XDS_CLIENT_CA, subject, expires(AUTHORITY.pair)),
    ]
    assert credentials.rotations == 1
    # grpcio's next handshake is given the new files once, then keeps them.
    assert credentials._fetch() is not None
    assert credentials._fetch() is None


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("dragoman_certificate_")
    }


def test_the_metrics_show_each_certificate_and_the_soonest() -> None:
    metrics = Metrics()
    assert samples(metrics) == {}  # nothing served, nothing used: no soonest either

    class Built:  # the controller, as far as the collector reads it
        store = None
        dag = served_dag()
        build_options = None
        dns = None

    metrics.state.controller = Built()  # type: ignore[assignment]  # a stand-in, above
    ca = CertificateExpiry(XDS_CLIENT_CA, "CN=x", expires(AUTHORITY.pair))
    metrics.state.xds_certificates = lambda: [ca]
    each = "dragoman_certificate_expiry_timestamp_seconds"
    assert samples(metrics) == {
        (each, (("kind", BACKEND_CA), ("name", "BackendTLSPolicy/default/partner-tls"))): expires(
            BACKEND_CAS[1].pair
        ),
        (each, (("kind", BACKEND_CLIENT), ("name", "default/client"))): expires(CLIENT),
        (each, (("kind", GATEWAY_CLIENT_CA), ("name", "default/gw/443"))): expires(
            CLIENT_CAS[1].pair
        ),
        (each, (("kind", GATEWAY_LISTENER), ("name", "default/site"))): expires(SITE),
        (each, (("kind", XDS_CLIENT_CA), ("name", "CN=x"))): expires(AUTHORITY.pair),
        ("dragoman_certificate_soonest_expiry_timestamp_seconds", ()): expires(CLIENT),
    }


def test_an_xbackend_s_own_ca_bundle_is_reported_under_its_name() -> None:
    ca = new_authority("xbackend", days=33, now=NOW)
    validation = {
        "hostname": "api.partner.example",
        "caCertificateRefs": [local_ref("ConfigMap", "xb-ca")],
    }
    dag = build_text(
        gateway_class(),
        gateway("gw", listeners=[listener("http", 80, "HTTP")]),
        xbackend(
            "partner", "api.partner.example", tls={"mode": "ServerOnly", "validation": validation}
        ),
        config_map("xb-ca", {"ca.crt": ca.pair.certificate.decode()}),
        http_route("r", rules=[rule(xbackend_ref("partner"))], parents=[parent_ref("gw")]),
    )
    assert dag_expiries(dag) == [
        CertificateExpiry(BACKEND_CA, "XBackend/default/partner", expires(ca.pair)),
    ]


def test_a_backend_tls_policy_on_the_system_cas_reports_no_bundle() -> None:
    dag = build_text(
        gateway_class(),
        gateway("gw", listeners=[listener("http", 80, "HTTP")]),
        external_service("partner", "api.partner.example", 443),
        http_route("r", rules=[rule(backend_ref("partner", 443))], parents=[parent_ref("gw")]),
        backend_tls_policy("partner-tls", "partner", "api.partner.example", well_known="System"),
    )
    assert dag_expiries(dag) == []
