"""examples/cert-manager: deploy/ with cert-manager issuing the xDS certificates. Offline: the
overlay renders valid objects without certgen's; every Secret the base mounts is issued;
each client Certificate's URI SAN is one dragoman's identity parser accepts and grants what
its comment says; and certificates made as the Certificates specify pass dragoman's own
check of its TLS files."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dragoman.cli import _parser
from dragoman.kubernetes.certificate_secrets import CA_SECRET, secret_name
from dragoman.security.files import TlsFiles, load_material
from dragoman.security.identities import ADMIN, FLEET, Role, gateway_uri, grpc_uri, identity_of
from dragoman.xds.transport.access_rules import Grant, csds_access, xds_access
from tests.support.kustomize import kustomize

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cert-manager"
DEPLOY = ROOT / "deploy"
GROUP = "cert-manager.io"
# The identities the example issues, by the stem certgen gives the same identity's Secret.
IDENTITIES = {
    "fleet": FLEET,
    "admin": ADMIN,
    "gateway-prod-edge": gateway_uri("prod/edge"),
    "grpc-greeter": grpc_uri("greeter"),
}


def rendered() -> list[dict[str, Any]]:
    return list(kustomize(EXAMPLE))


def certificates() -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc["spec"]
        for doc in rendered()
        if doc["kind"] == "Certificate" and doc["apiVersion"] == f"{GROUP}/v1"
    }


def test_the_overlay_is_the_base_without_certgen_plus_the_issuers() -> None:
    example = {(doc["kind"], doc["metadata"]["name"]) for doc in rendered()}
    base = {(doc["kind"], doc["metadata"]["name"]) for doc in kustomize(DEPLOY)}
    removed = {(kind, name) for kind, name in base if name == "dragoman-certgen"}
    assert {kind for kind, _ in removed} == {
        "Job",
        "CronJob",
        "ServiceAccount",
        "Role",
        "RoleBinding",
    }
    assert (
        example - {(k, n) for k, n in example if k in ("Certificate", "Issuer")} == base - removed
    )
    for doc in rendered():
        if doc["apiVersion"].startswith((f"{GROUP}/", "gateway.networking.k8s.io/")):
            continue  # CRDs kubernetes-validate does not know
        kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), strict=True)


def test_every_secret_the_base_mounts_is_issued_by_the_ca_issuer() -> None:
    mounted = {
        volume["secret"]["secretName"]
        for doc in kustomize(DEPLOY)
        if doc["kind"] == "Deployment"
        for volume in doc["spec"]["template"]["spec"].get("volumes", [])
        if "secret" in volume
    }
    assert mounted, "the base mounts the xDS Secrets"
    issuers = {
        doc["metadata"]["name"]: doc["spec"] for doc in rendered() if doc["kind"] == "Issuer"
    }
    specs = certificates()
    issued = {spec["secretName"]: spec for spec in specs.values()}
    assert mounted <= set(issued)
    ca = specs[CA_SECRET]
    assert ca["isCA"] is True and "selfSigned" in issuers[ca["issuerRef"]["name"]]
    for name in mounted:
        issuer = issuers[issued[name]["issuerRef"]["name"]]
        assert issuer == {"ca": {"secretName": ca["secretName"]}}, name


def test_client_uri_sans_name_the_identities_dragoman_grants() -> None:
    specs = certificates()
    for stem, uri in IDENTITIES.items():
        spec = specs[secret_name(stem)]
        assert spec["secretName"] == secret_name(stem)
        assert spec["uris"] == [uri]
        assert "client auth" in spec["usages"]
        identity = identity_of(spec["uris"])
        assert identity is not None, uri
        if identity.role is Role.ADMIN:
            assert csds_access(identity, authenticated=True) is None
        elif identity.role is Role.GATEWAY:
            assert xds_access(identity, True, "prod/edge", grpc_client=False) == Grant("prod/edge")
        else:
            grpc = identity.role is Role.GRPC
            assert xds_access(identity, True, "dragoman/all", grpc_client=grpc) == Grant()
    clients = {name for name, spec in specs.items() if "uris" in spec}
    assert clients == {secret_name(stem) for stem in IDENTITIES}


def test_the_server_certificate_names_what_clients_dial() -> None:
    spec = certificates()[secret_name("server")]
    assert "server auth" in spec["usages"] and "uris" not in spec
    # The names certgen's Job puts in the server certificate, the one the Envoys check among them.
    [job] = [doc for doc in kustomize(DEPLOY) if doc["kind"] == "Job"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    args: argparse.Namespace = _parser().parse_args(container["args"])
    assert set(spec["dnsNames"]) == set(args.server_names)
    [envoy] = [doc for doc in kustomize(DEPLOY) if doc["kind"] == "ConfigMap"]
    assert "dragoman.dragoman-system.svc" in spec["dnsNames"]
    assert "dragoman.dragoman-system.svc" in str(envoy["data"])


USAGES = {
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
}


def issue(
    spec: dict[str, Any], issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate and key made as cert-manager makes them from `spec` (self-signed if
    `issuer` is None)."""
    assert spec["privateKey"] == {**spec["privateKey"], "algorithm": "ECDSA", "size": 256}
    key = ec.generate_private_key(ec.SECP256R1())
    subject = (
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, spec.get("commonName", ""))])
        if spec.get("commonName")
        else x509.Name([])
    )
    issuer_name, issuer_key = issuer if issuer is not None else (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    hours = int(spec["duration"].removesuffix("h"))
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(hours=hours))
        .add_extension(
            x509.BasicConstraints(ca=bool(spec.get("isCA")), path_length=None), critical=True
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in spec.get("dnsNames", [])]
    sans += [x509.UniformResourceIdentifier(uri) for uri in spec.get("uris", [])]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=not subject)
    usages = [USAGES[usage] for usage in spec.get("usages", []) if usage in USAGES]
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    certificate = builder.sign(issuer_key, hashes.SHA256())
    return certificate, key


def pem(certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    return (
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


@pytest.mark.parametrize("stem", ["server", *IDENTITIES])
def test_certificates_made_as_specified_pass_dragomans_check(tmp_path: Path, stem: str) -> None:
    specs = certificates()
    ca_certificate, ca_key = issue(specs[CA_SECRET], None)
    certificate, key = issue(specs[secret_name(stem)], (ca_certificate.subject, ca_key))
    files = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt")
    crt, key_pem = pem(certificate, key)
    files.certificate.write_bytes(crt)
    files.private_key.write_bytes(key_pem)
    files.trusted_ca.write_bytes(pem(ca_certificate, ca_key)[0])
    material = load_material(files)  # what dragoman, or `dragoman bootstrap`'s checks, read
    assert material.not_after == certificate.not_valid_after_utc.timestamp()
    uris = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    identity = identity_of(list(uris.get_values_for_type(x509.UniformResourceIdentifier)))
    assert (identity.uri if identity else None) == IDENTITIES.get(stem)
