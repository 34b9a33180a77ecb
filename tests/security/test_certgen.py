"""`dragoman certgen`: the files and Secrets it writes, their identities, and that running it
again keeps what is still good (idempotent), against a real kubernetes client and the fake
API server for Secrets."""

from __future__ import annotations

import base64
import datetime
import os
from pathlib import Path

import grpc
import kubernetes
import pytest
from cryptography import x509

from dragoman import cli
from dragoman.kubernetes.certificate_secrets import CA_SECRET, write_secrets
from dragoman.security.certgen import DEFAULT_SERVER_NAMES, renew
from dragoman.security.files import TlsFiles, load_material
from dragoman.security.identities import identity_of
from tests.support.kubeapi import KubeApiServer

EXPECTED = {
    "server": None,
    "fleet": "spiffe://dragoman.dev/fleet",
    "admin": "spiffe://dragoman.dev/admin",
    "gateway-default-a": "spiffe://dragoman.dev/gateway/default/a",
    "grpc-greeter": "spiffe://dragoman.dev/grpc/greeter",
}


def _uris(pem: bytes) -> list[str]:
    certificate = x509.load_pem_x509_certificate(pem)
    sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return list(sans.get_values_for_type(x509.UniformResourceIdentifier))


def test_files_with_their_identities(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tls"
    code = cli.main(
        ["certgen", "--out", str(out), "--gateway", "default/a", "--grpc-client", "greeter"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "PRIVATE" not in printed
    for stem, uri in EXPECTED.items():
        files = TlsFiles(out / f"{stem}.crt", out / f"{stem}.key", out / "ca.crt")
        load_material(files)  # signed by the CA, key matching, valid now
        assert os.stat(files.private_key).st_mode & 0o777 == 0o600
        identity = identity_of(_uris(files.certificate.read_bytes()))
        assert (str(identity) if identity else None) == uri
    assert os.stat(out / "ca.key").st_mode & 0o777 == 0o600
    server = x509.load_pem_x509_certificate((out / "server.crt").read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "dragoman",
        "dragoman.dragoman-system.svc",
        "localhost",
    ]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_running_again_keeps_what_is_good_and_adds_what_is_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tls"
    assert cli.main(["certgen", "--out", str(out), "--gateway", "default/a"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert (
        cli.main(["certgen", "--out", str(out), "--gateway", "default/a", "--gateway", "x/b"]) == 0
    )
    printed = capsys.readouterr().out
    assert "written  " + str(out / "gateway-x-b.crt") in printed
    assert printed.count("kept") == 5  # ca, server, fleet, admin, gateway-default-a
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {name: after[name] for name in before} == before
    # Other server names: the server pair is made again, signed by the same CA.
    assert cli.main(["certgen", "--out", str(out), "--server-name", "xds.example.com"]) == 0
    assert (out / "server.crt").read_bytes() != before["server.crt"]
    assert (out / "ca.crt").read_bytes() == before["ca.crt"]


def test_a_pair_close_to_expiry_or_unreadable_is_made_again(tmp_path: Path) -> None:
    first = renew(None, {}, days=10)  # within the 30 days of renewal: replaced next time
    existing = {pair.name: (pair.certificate, pair.private_key) for pair, _ in first.pairs}
    existing["fleet"] = (b"garbage", b"garbage")
    ca = first.authority.pair
    again = renew((ca.certificate, ca.private_key), existing, days=365)
    assert again.authority_kept
    assert all(not kept for _, kept in again.pairs)
    third = renew(
        (ca.certificate, ca.private_key),
        {pair.name: (pair.certificate, pair.private_key) for pair, _ in again.pairs},
    )
    assert all(kept for _, kept in third.pairs)


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["certgen", "--out", str(tmp_path), "--days", "0"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["certgen", "--out", str(tmp_path), "--gateway", "no-slash"])
    (tmp_path / "file").write_text("")
    assert cli.main(["certgen", "--out", str(tmp_path / "file")]) == 1
    assert "dragoman certgen:" in capsys.readouterr().err


def test_secrets_in_kubernetes_idempotently(tmp_path: Path) -> None:
    with KubeApiServer() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        arguments = [
            "certgen", "--kubernetes", "--namespace", "dragoman-system",
            "--kubeconfig", str(kubeconfig), "--gateway", "default/a",
        ]  # fmt: skip
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.client_configuration()))
        # Without its namespace: a clear error, nothing written.
        assert cli.main(arguments) == 1
        core.create_namespace({"metadata": {"name": "dragoman-system"}})
        assert cli.main(arguments) == 0
        secrets = {s.metadata.name: s for s in core.list_namespaced_secret("dragoman-system").items}
        assert sorted(secrets) == [
            "dragoman-xds-admin",
            "dragoman-xds-ca",
            "dragoman-xds-fleet",
            "dragoman-xds-gateway-default-a",
            "dragoman-xds-server",
        ]
        ca = base64.b64decode(secrets[CA_SECRET].data["tls.crt"])
        for secret in secrets.values():
            assert secret.type == "kubernetes.io/tls"
            assert base64.b64decode(secret.data["ca.crt"]) == ca
            (tmp_path / "c").write_bytes(base64.b64decode(secret.data["tls.crt"]))
            (tmp_path / "k").write_bytes(base64.b64decode(secret.data["tls.key"]))
            (tmp_path / "a").write_bytes(ca)
            load_material(TlsFiles(tmp_path / "c", tmp_path / "k", tmp_path / "a"))
        gateway = base64.b64decode(secrets["dragoman-xds-gateway-default-a"].data["tls.crt"])
        assert _uris(gateway) == ["spiffe://dragoman.dev/gateway/default/a"]
        versions = {n: s.metadata.resource_version for n, s in secrets.items()}

        # Again: nothing is written (the same resourceVersions).
        report = write_secrets(
            "dragoman-system",
            server_names=("dragoman",) * 0
            or ("dragoman", "dragoman.dragoman-system.svc", "localhost", "127.0.0.1"),
            gateways=["default/a"],
            days=365,
            api=core,
        )
        assert {action for _, action in report} == {"kept"}
        again = {
            s.metadata.name: s.metadata.resource_version
            for s in core.list_namespaced_secret("dragoman-system").items
        }
        assert again == versions

        # A Secret broken by hand is replaced; the others are kept.
        broken = secrets["dragoman-xds-fleet"]
        broken.data["tls.key"] = base64.b64encode(b"nonsense").decode()
        core.replace_namespaced_secret("dragoman-xds-fleet", "dragoman-system", broken)
        report = dict(
            write_secrets(
                "dragoman-system",
                server_names=DEFAULT_SERVER_NAMES,
                gateways=["default/a"],
                days=365,
                api=core,
            )
        )
        assert report["dragoman-system/dragoman-xds-fleet"] == "written"
        assert report["dragoman-system/dragoman-xds-admin"] == "kept"


def test_written_files_work_for_grpc_mutual_tls(tmp_path: Path) -> None:
    """The files serve as they are: grpcio takes the server and fleet pairs."""
    out = tmp_path / "tls"
    assert cli.main(["certgen", "--out", str(out)]) == 0
    credentials = grpc.ssl_channel_credentials(
        (out / "ca.crt").read_bytes(),
        (out / "fleet.key").read_bytes(),
        (out / "fleet.crt").read_bytes(),
    )
    assert credentials is not None
    valid_until = x509.load_pem_x509_certificate(
        (out / "fleet.crt").read_bytes()
    ).not_valid_after_utc
    days = (valid_until - datetime.datetime.now(datetime.UTC)).days
    assert 363 <= days <= 365
