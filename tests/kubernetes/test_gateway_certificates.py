"""Each provisioned Gateway's xDS client certificate, issued by dragoman with the CA of a
Secret, against the fake API server: the Secret created with the Gateway's identity (the
certificate parsed, its URI SAN checked, its signature by the CA verified), kept while
good, issued again near its end or when it is not for this identity, deleted with the
Gateway; a Secret of that name not the Gateway's, and a CA that cannot sign, reported on
the Gateway's condition, changing nothing."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client as k8s

from dragoman.kubernetes.gateway_certificates import ISSUED_DAYS, Signer, load_signer
from dragoman.kubernetes.provisioner import ObjectClient, provision, provision_all
from dragoman.objects import Gateway, GatewayListener, ObjectMeta
from dragoman.provisioning.parameters import NO_SETTINGS
from dragoman.provisioning.plan import PROVISIONED_KINDS, GatewayPlan, plan_gateway
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.security.certgen import Authority, client_pair, new_authority
from dragoman.security.files import signed_by
from dragoman.security.identities import gateway_uri
from tests.support.kubeapi import KubeApiServer

UID = "0b5e-edge"
CA_SECRET = "dragoman-system/dragoman-xds-ca"
SECRET = "dragoman-edge-xds"
IDENTITY = "spiffe://dragoman.dev/gateway/default/edge"
ISSUING = ProvisionSettings(ca_secret=CA_SECRET)
HTTP = GatewayListener("http", 80)


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    with KubeApiServer() as api:
        yield api


@pytest.fixture
def objects(server: KubeApiServer) -> ObjectClient:
    return ObjectClient(k8s.ApiClient(server.client_configuration()))


@pytest.fixture
def authority(server: KubeApiServer) -> Authority:
    """A CA in the Secret certgen writes (tls.crt, tls.key, ca.crt)."""
    ca = new_authority()
    server.apply(ca_secret(ca.pair.certificate, ca.pair.private_key, ca.pair.certificate))
    return ca


def ca_secret(certificate: bytes, key: bytes, trusted: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "dragoman-xds-ca", "namespace": "dragoman-system"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(certificate), "tls.key": b64(key), "ca.crt": b64(trusted)},
    }


def b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def plan(uid: str = UID, provision: ProvisionSettings = ISSUING) -> GatewayPlan:
    gateway = Gateway(
        meta=ObjectMeta("edge", "default", generation=1, uid=uid),
        gateway_class_name="dragoman",
        listeners=(HTTP,),
    )
    return plan_gateway(gateway, (HTTP,), NO_SETTINGS, provision)


def signer(objects: ObjectClient) -> Signer:
    return load_signer(objects, CA_SECRET, datetime.timedelta(days=30))


def secret_files(server: KubeApiServer) -> dict[str, bytes]:
    secret = server.get("Secret", SECRET)
    assert secret is not None
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def certificate(server: KubeApiServer) -> x509.Certificate:
    return x509.load_pem_x509_certificate(secret_files(server)["tls.crt"])


def uris(cert: x509.Certificate) -> list[str]:
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return sans.get_values_for_type(x509.UniformResourceIdentifier)


def test_the_secret_is_issued_with_the_gateways_identity_and_owned_by_it(
    server: KubeApiServer, objects: ObjectClient, authority: Authority
) -> None:
    outcome = provision(objects, plan(), UID, signer(objects))
    assert outcome.condition["status"] == "True", outcome.condition
    assert f"from Secret {SECRET}, issued by dragoman" in outcome.condition["message"]
    secret = server.get("Secret", SECRET)
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == UID
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "dragoman"
    cert = certificate(server)
    assert uris(cert) == [IDENTITY] == [gateway_uri("default/edge")]
    assert signed_by(cert, [authority.certificate])
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH in usage
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime == datetime.timedelta(days=ISSUED_DAYS, hours=1)
    files = secret_files(server)
    assert files["ca.crt"] == authority.pair.certificate
    assert b"PRIVATE KEY" in files["tls.key"]
    # The pods mount that Secret.
    deployment = server.get("Deployment", "dragoman-edge")
    assert deployment is not None
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"secretName": SECRET, "defaultMode": 0o440} in [v.get("secret") for v in volumes]


def test_a_good_certificate_is_kept_and_one_near_its_end_is_issued_again(
    server: KubeApiServer, objects: ObjectClient, authority: Authority
) -> None:
    provision(objects, plan(), UID, signer(objects))
    first = secret_files(server)
    version = (server.get("Secret", SECRET) or {})["metadata"]["resourceVersion"]
    provision(objects, plan(), UID, signer(objects))
    assert secret_files(server) == first
    assert (server.get("Secret", SECRET) or {})["metadata"]["resourceVersion"] == version
    # Issued 70 of its 90 days ago: 20 days left, within the 30 of the threshold.
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=70)
    old = client_pair(authority, "xds", IDENTITY, ISSUED_DAYS, past)
    secret = server.get("Secret", SECRET)
    assert secret is not None
    secret["data"].update({"tls.crt": b64(old.certificate), "tls.key": b64(old.private_key)})
    server.apply(secret)
    outcome = provision(objects, plan(), UID, signer(objects))
    assert outcome.condition["status"] == "True"
    renewed = certificate(server)
    assert renewed.not_valid_after_utc > x509.load_pem_x509_certificate(
        old.certificate
    ).not_valid_after_utc + datetime.timedelta(days=60)
    assert uris(renewed) == [IDENTITY]
    assert secret_files(server)["tls.key"] != old.private_key


def test_a_certificate_of_another_identity_or_ca_is_replaced(
    server: KubeApiServer, objects: ObjectClient, authority: Authority
) -> None:
    provision(objects, plan(), UID, signer(objects))
    other = client_pair(authority, "xds", gateway_uri("default/other"))
    stranger = client_pair(new_authority(), "xds", IDENTITY)
    for pair in (other, stranger):
        secret = server.get("Secret", SECRET)
        assert secret is not None
        secret["data"].update({"tls.crt": b64(pair.certificate), "tls.key": b64(pair.private_key)})
        server.apply(secret)
        provision(objects, plan(), UID, signer(objects))
        cert = certificate(server)
        assert uris(cert) == [IDENTITY] and signed_by(cert, [authority.certificate])


def test_a_rotated_ca_bundle_reaches_ca_crt_and_the_old_cas_pair_is_kept(
    server: KubeApiServer, objects: ObjectClient, authority: Authority
) -> None:
    provision(objects, plan(), UID, signer(objects))
    issued = secret_files(server)["tls.crt"]
    # certgen replaced the CA: the new one signs, both are trusted meanwhile.
    new = new_authority()
    bundle = new.pair.certificate + authority.pair.certificate
    server.apply(ca_secret(new.pair.certificate, new.pair.private_key, bundle))
    provision(objects, plan(), UID, signer(objects))
    files = secret_files(server)
    assert files["ca.crt"] == bundle
    assert files["tls.crt"] == issued  # still good, signed by a CA still trusted


def test_the_secret_goes_with_the_gateway(
    server: KubeApiServer, objects: ObjectClient, authority: Authority
) -> None:
    edge = plan()
    provision_all(objects, [edge], {edge.gateway: UID}, signer(objects))
    assert server.get("Secret", SECRET) is not None
    theirs = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": {}}
    server.apply({**theirs, "metadata": {"name": "theirs", "namespace": "default"}})
    provision_all(objects, [], {}, signer(objects))
    assert server.get("Secret", SECRET) is None
    assert all(server.get(kind, "dragoman-edge") is None for _, kind in PROVISIONED_KINDS)
    assert server.get("Secret", "theirs") is not None
    assert server.get("Secret", "dragoman-xds-ca", "dragoman-system") is not None


def test_a_secret_of_that_name_not_the_gateways_is_a_conflict_changing_nothing(
    server: KubeApiServer, objects: ObjectClient, authority: Authority
) -> None:
    mine = {"tls.crt": b64(b"mine"), "tls.key": b64(b"mine")}
    server.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": "default"},
            "type": "kubernetes.io/tls",
            "data": mine,
        }
    )
    outcome = provision(objects, plan(), UID, signer(objects))
    assert (outcome.condition["status"], outcome.condition["reason"]) == ("False", "NameConflict")
    assert f"Secret default/{SECRET} exists" in outcome.condition["message"]
    assert (server.get("Secret", SECRET) or {})["data"] == mine
    assert all(server.get(kind, "dragoman-edge") is None for _, kind in PROVISIONED_KINDS)


@pytest.mark.parametrize("broken", ["absent", "no key", "key of another CA", "expired"])
def test_a_ca_that_cannot_sign_is_reported_and_nothing_is_made(
    server: KubeApiServer, objects: ObjectClient, broken: str
) -> None:
    ca = new_authority()
    if broken == "no key":
        secret = ca_secret(ca.pair.certificate, b"", ca.pair.certificate)
        del secret["data"]["tls.key"]
        server.apply(secret)
    elif broken == "key of another CA":
        server.apply(
            ca_secret(ca.pair.certificate, new_authority().pair.private_key, ca.pair.certificate)
        )
    elif broken == "expired":
        past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=400)
        old = new_authority(days=365, now=past)
        server.apply(ca_secret(old.pair.certificate, old.pair.private_key, old.pair.certificate))
    outcome = provision(objects, plan(), UID, signer(objects))
    condition = outcome.condition
    assert (condition["status"], condition["reason"]) == ("False", "CertificateUnavailable")
    assert CA_SECRET in condition["message"]
    assert "PRIVATE" not in condition["message"]
    assert server.get("Secret", SECRET) is None
    assert all(server.get(kind, "dragoman-edge") is None for _, kind in PROVISIONED_KINDS)


def test_without_a_ca_secret_the_plan_names_a_secret_to_provide(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    provided = plan(provision=ProvisionSettings())
    assert provided.issued_secret is None
    outcome = provision(objects, provided, UID)
    assert outcome.condition["status"] == "True"
    assert outcome.condition["message"].endswith(
        f"from Secret {SECRET}, which must be provided (dragoman does not issue it)"
    )
    assert server.get("Secret", SECRET) is None


def test_a_ca_near_its_own_end_does_not_issue_again_on_every_pass(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    # 10 days left to the CA: no pair it issues can outlast the 30 days of the threshold.
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=355)
    ca = new_authority(days=365, now=past).pair
    server.apply(ca_secret(ca.certificate, ca.private_key, ca.certificate))
    assert provision(objects, plan(), UID, signer(objects)).condition["status"] == "True"
    issued = secret_files(server)["tls.crt"]
    provision(objects, plan(), UID, signer(objects))
    assert secret_files(server)["tls.crt"] == issued
