"""`dragoman certgen --renew-before`: what expires within the threshold is issued again, the
CA with an overlap in which both CAs are trusted, and a second run changes nothing.

Certificates are issued "in the past" (`now=`), so that at the real time they are as close
to expiry as a scenario needs and still valid for the TLS handshakes here.
"""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import threading
from pathlib import Path

import kubernetes
import pytest
from cryptography import x509

from dragoman import cli
from dragoman.kubernetes.certificate_secrets import CA_SECRET, write_secrets
from dragoman.security.certgen import DEFAULT_SERVER_NAMES, Issued, renew
from dragoman.security.files import TlsFiles, load_material
from dragoman.security.files_store import write_files
from tests.support.kubeapi import KubeApiServer

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
THIRTY_DAYS = 30 * DAY


def bundle_of(directory: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates((directory / "ca.crt").read_bytes())


def issuer_of(path: Path, bundle: list[x509.Certificate]) -> int:
    """Which CA of the bundle signed the certificate in `path` (its index)."""
    certificate = x509.load_pem_x509_certificate(path.read_bytes())
    return [ca.subject for ca in bundle].index(certificate.issuer)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_leaves_within_the_threshold_are_issued_again_by_the_same_ca(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    # 90-day leaves issued 70 days ago: 20 days left, within the 30 of the threshold.
    write_files(out, server_names=DEFAULT_SERVER_NAMES, days=90, now=NOW - 70 * DAY)
    before = snapshot(out)
    report = dict(write_files(out, server_names=DEFAULT_SERVER_NAMES, days=90))
    assert report[str(out / "ca.crt")] == "kept"
    assert {report[str(out / f"{s}.crt")] for s in ("server", "fleet", "admin")} == {"written"}
    after = snapshot(out)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    for stem in ("server", "fleet", "admin"):
        assert after[f"{stem}.crt"] != before[f"{stem}.crt"]
        load_material(TlsFiles(out / f"{stem}.crt", out / f"{stem}.key", out / "ca.crt"))
        left = x509.load_pem_x509_certificate(after[f"{stem}.crt"]).not_valid_after_utc - NOW
        assert left > 89 * DAY


def test_a_second_run_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tls"
    arguments = ["certgen", "--out", str(out), "--renew-before", "720h", "--gateway", "a/b"]
    # A CA within twice the threshold of its expiry (so renewed) and leaves within it.
    write_files(
        out, server_names=DEFAULT_SERVER_NAMES, gateways=["a/b"], days=365, now=NOW - 340 * DAY
    )
    assert cli.main(arguments) == 0
    first = snapshot(out)
    capsys.readouterr()
    assert cli.main(arguments) == 0
    printed = capsys.readouterr().out
    assert "written" not in printed
    assert printed.count("kept") == 5  # ca, server, fleet, admin, gateway-a-b
    assert snapshot(out) == first


def test_a_ca_close_to_expiry_is_replaced_with_both_trusted_and_leaves_kept(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tls"
    # Issued 310 days ago: the CA and the leaves have 55 days left. Under 60 (twice the
    # threshold): the CA is replaced; over 30: the leaves stay, signed by the old CA.
    write_files(out, server_names=DEFAULT_SERVER_NAMES, days=365, now=NOW - 310 * DAY)
    before = snapshot(out)
    [old_ca] = bundle_of(out)
    report = dict(write_files(out, server_names=DEFAULT_SERVER_NAMES, days=365))
    assert report[str(out / "ca.crt")] == "written"
    bundle = bundle_of(out)
    assert len(bundle) == 2 and bundle[1] == old_ca
    new_ca = bundle[0]
    assert new_ca.subject != old_ca.subject  # distinct names: issuers are found by name
    assert (out / "ca.key").read_bytes() != before["ca.key"]
    for stem in ("server", "fleet", "admin"):
        assert report[str(out / f"{stem}.crt")] == "kept"
        assert (out / f"{stem}.crt").read_bytes() == before[f"{stem}.crt"]
        assert issuer_of(out / f"{stem}.crt", bundle) == 1
        load_material(TlsFiles(out / f"{stem}.crt", out / f"{stem}.key", out / "ca.crt"))
    # Idempotent during the overlap too.
    again = snapshot(out)
    write_files(out, server_names=DEFAULT_SERVER_NAMES, days=365)
    assert snapshot(out) == again


def _phases() -> list[Issued]:
    """One CA's renewal seen at four moments, each run on the output of the one before."""
    results: list[Issued] = []
    ca: tuple[bytes, bytes] | None = None
    existing: dict[str, tuple[bytes, bytes]] = {}
    start = NOW - 400 * DAY
    for offset in (0, 310, 340, 355):
        issued = renew(ca, existing, now=start + offset * DAY, renew_before=THIRTY_DAYS)
        ca = (issued.trust_bundle, issued.authority.pair.private_key)
        existing = {pair.name: (pair.certificate, pair.private_key) for pair, _ in issued.pairs}
        results.append(issued)
    return results


def test_the_overlap_leaves_move_first_then_the_old_ca_goes() -> None:
    first, overlap, moved, done = _phases()
    original = first.authority.certificate
    # Day 310: a new CA; the bundle trusts both; every leaf is still the old CA's.
    assert not overlap.authority_kept
    trusted = x509.load_pem_x509_certificates(overlap.trust_bundle)
    assert trusted == [overlap.authority.certificate, original]
    assert all(kept for _, kept in overlap.pairs)
    # Day 340: the old CA has 25 days left: every leaf is issued again, by the new CA,
    # while the old CA is still trusted (a peer not yet updated still verifies).
    assert moved.authority_kept
    assert x509.load_pem_x509_certificates(moved.trust_bundle) == trusted
    assert not any(kept for _, kept in moved.pairs)
    for pair, _ in moved.pairs:
        issuer = x509.load_pem_x509_certificate(pair.certificate).issuer
        assert issuer == overlap.authority.certificate.subject
    # Day 355: 10 days left, under half the threshold: the old CA is no longer trusted, and
    # nothing it signed is left.
    assert x509.load_pem_x509_certificates(done.trust_bundle) == [overlap.authority.certificate]
    assert all(kept for _, kept in done.pairs)


def _handshake(server: tuple[Path, Path], client: tuple[Path, Path], bundle: Path) -> str:
    """Mutual TLS over loopback with the standard library: "ok" or the error's text."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*server)
    server_context.load_verify_locations(bundle)
    server_context.verify_mode = ssl.CERT_REQUIRED
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.load_cert_chain(*client)
    client_context.load_verify_locations(bundle)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    errors: list[str] = []

    def serve() -> None:
        try:
            connection, _ = listener.accept()
            with server_context.wrap_socket(connection, server_side=True) as tls:
                tls.sendall(tls.recv(16))
        except (OSError, ssl.SSLError) as error:
            errors.append(str(error))

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with (
            socket.create_connection(listener.getsockname(), timeout=10) as raw,
            client_context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(b"ping")
            answer = tls.recv(16)
    except (OSError, ssl.SSLError) as error:
        answer = str(error).encode()
    finally:
        thread.join(timeout=10)
        listener.close()
    return "ok" if answer == b"ping" and not errors else f"{answer!r} {errors}"


def test_during_the_overlap_a_peer_of_either_ca_connects(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    write_files(out, server_names=DEFAULT_SERVER_NAMES, days=365, now=NOW - 310 * DAY)
    old_bundle = tmp_path / "old-ca.crt"
    old_bundle.write_bytes((out / "ca.crt").read_bytes())
    # The CA is renewed; other server names make the server's pair anew, by the new CA,
    # while the fleet's stays the old CA's.
    write_files(out, server_names=("localhost", "dragoman"), days=365)
    bundle = bundle_of(out)
    assert issuer_of(out / "server.crt", bundle) == 0
    assert issuer_of(out / "fleet.crt", bundle) == 1
    server = (out / "server.crt", out / "server.key")
    fleet = (out / "fleet.crt", out / "fleet.key")
    assert _handshake(server, fleet, out / "ca.crt") == "ok"
    # Without the overlap (the old CA alone, as before the renewal reached this peer), the
    # new server certificate is refused: why both must be trusted for a while.
    assert _handshake(server, fleet, old_bundle) != "ok"


def test_secrets_carry_the_bundle_during_the_overlap(tmp_path: Path) -> None:
    with KubeApiServer() as api:
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.client_configuration()))
        core.create_namespace({"metadata": {"name": "dragoman-system"}})

        def write(now: datetime.datetime | None = None) -> dict[str, str]:
            return dict(
                write_secrets(
                    "dragoman-system",
                    server_names=DEFAULT_SERVER_NAMES,
                    days=365,
                    api=core,
                    now=now,
                )
            )

        write(NOW - 310 * DAY)
        old = {s.metadata.name: s for s in core.list_namespaced_secret("dragoman-system").items}
        report = write()
        assert set(report.values()) == {"written"}  # the CA, and every ca.crt: the bundle
        secrets = {s.metadata.name: s for s in core.list_namespaced_secret("dragoman-system").items}
        signing = base64.b64decode(secrets[CA_SECRET].data["tls.crt"])
        bundle = base64.b64decode(secrets[CA_SECRET].data["ca.crt"])
        old_ca = base64.b64decode(old[CA_SECRET].data["tls.crt"])
        assert bundle == signing + old_ca
        for name, secret in secrets.items():
            assert base64.b64decode(secret.data["ca.crt"]) == bundle
            if name != CA_SECRET:  # the pairs are kept: only ca.crt changed
                assert secret.data["tls.crt"] == old[name].data["tls.crt"]
        versions = {n: s.metadata.resource_version for n, s in secrets.items()}
        assert set(write().values()) == {"kept"}
        after = core.list_namespaced_secret("dragoman-system").items
        assert {s.metadata.name: s.metadata.resource_version for s in after} == versions


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--renew-before", "0d"], "must be positive"),
        (["--renew-before", "400d"], "shorter than the certificates' 365 days"),
        (["--renew-before", "200d"], "under half the CA's validity"),
    ],
)
def test_thresholds_that_cannot_work_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    assert cli.main(["certgen", "--out", str(tmp_path), *arguments]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_threshold_that_is_not_a_duration_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        cli.main(["certgen", "--out", str(tmp_path), "--renew-before", "a month"])
