"""Each provisioned Gateway's xDS client certificate, issued by dragoman itself (`serve
--provision --provision-ca-secret NS/NAME`): a kubernetes.io/tls Secret `dragoman-<gateway>-xds`
in the Gateway's namespace, owned by it, holding a pair with the URI SAN
`spiffe://dragoman.dev/gateway/<ns>/<name>` signed by the CA of that Secret, and `ca.crt`, the
CAs it says to trust. A pair still good is kept; one expiring within the renewal threshold,
signed by a CA no longer trusted, or not for this identity is issued again (certgen's rules,
`dragoman.security.certgen`). Keys go to the API server alone: never to a log or a status.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.kubernetes.client_errors import describe_error

# Issued for 90 days (renewed 30 days before they end by default), as the cert-manager
# Certificate `dragoman provision --cert-manager-issuer` prints.
ISSUED_DAYS = 90


class CertificateUnavailable(Exception):
    """The Gateway's certificate cannot be issued; the message says why (never a key)."""


@dataclass(frozen=True, slots=True)
class Signer:
    """The CA read for one provisioning pass, or why it could not be."""

    source: str  # NAMESPACE/NAME of its Secret
    renew_before: datetime.timedelta = datetime.timedelta(days=30)
    certificate: bytes = b""  # tls.crt
    key: bytes = field(default=b"", repr=False)  # tls.key
    trusted: bytes = b""  # ca.crt (tls.crt when there is none)
    problem: str = ""

    def secret_data(
        self,
        current: Mapping[str, Any] | None,
        uri: str,
        now: datetime.datetime | None = None,
    ) -> dict[str, str] | None:
        """The data for the Secret now `current` (None: absent), or None when it is still
        good and trusts what this CA says to trust. Raises CertificateUnavailable."""
        if self.problem:
            raise CertificateUnavailable(self.problem)
        data = _decoded((current or {}).get("data") or {})
        existing = None
        if "tls.crt" in data and "tls.key" in data:
            existing = (data["tls.crt"], data["tls.key"])
        # (cryptography, loaded here: a server that provisions no certificates never needs
        # its 9 MiB.)
        from dragoman.security.certgen import renew_client_pair

        try:
            pair, kept = renew_client_pair(
                (self.certificate, self.key),
                existing,
                "xds",
                uri,
                ISSUED_DAYS,
                trusted=self.trusted,
                renew_before=self.renew_before,
                now=now,
            )
        except ValueError as error:
            raise CertificateUnavailable(f"the CA in Secret {self.source}: {error}") from None
        if kept and data.get("ca.crt") == self.trusted:
            return None
        return {
            "tls.crt": _encoded(pair.certificate),
            "tls.key": _encoded(pair.private_key),
            "ca.crt": _encoded(self.trusted),
        }


def load_signer(client: Any, ca_secret: str, renew_before: datetime.timedelta) -> Signer:
    """The CA of the Secret `NAMESPACE/NAME`, read through an ObjectClient."""
    namespace, _, name = ca_secret.partition("/")

    def unavailable(problem: str) -> Signer:
        return Signer(ca_secret, renew_before, problem=problem)

    try:
        secret = client.get("v1", "Secret", namespace, name)
    except Exception as error:  # the client's ApiException, or the connection's
        return unavailable(f"reading the CA's Secret {ca_secret}: {describe_error(error)}")
    if secret is None:
        return unavailable(f"the CA's Secret {ca_secret} does not exist")
    data = _decoded(secret.get("data") or {})
    if "tls.crt" not in data or "tls.key" not in data:
        return unavailable(f"the CA's Secret {ca_secret} lacks tls.crt or tls.key")
    trusted = data.get("ca.crt", data["tls.crt"])
    return Signer(ca_secret, renew_before, data["tls.crt"], data["tls.key"], trusted)


def _decoded(data: Mapping[str, Any]) -> dict[str, bytes]:
    """A Secret's base64 data; a value that is not base64 is left out (and so replaced)."""
    found = {}
    for key, value in data.items():
        try:
            found[key] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            continue
    return found


def _encoded(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")
