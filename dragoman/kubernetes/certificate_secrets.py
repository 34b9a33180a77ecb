"""`dragoman certgen --kubernetes`: the CA and pairs as `kubernetes.io/tls` Secrets.

Each Secret holds `tls.crt`, `tls.key` and `ca.crt` (what cert-manager writes too), so a pod
mounting one Secret has all three files. A Secret still good is left alone; the CA lives in
its own Secret, which only this command (and dragoman's certgen Job) reads.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dragoman.security.certgen import RENEW_BEFORE, renew

SECRET_PREFIX = "dragoman-xds-"
CA_SECRET = SECRET_PREFIX + "ca"
MANAGED_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "dragoman-certgen"


def secret_name(stem: str) -> str:
    return SECRET_PREFIX + stem


def write_secrets(
    namespace: str,
    *,
    server_names: Sequence[str],
    gateways: Iterable[str] = (),
    grpc_clients: Iterable[str] = (),
    days: int,
    kubeconfig: Path | None = None,
    context: str | None = None,
    api: Any = None,
    renew_before: datetime.timedelta = RENEW_BEFORE,
    now: datetime.datetime | None = None,
) -> list[tuple[str, str]]:
    """Create or replace the Secrets; returns ("ns/name", "written" or "kept") for each."""
    from kubernetes import client

    from dragoman.kubernetes.client import api_client

    core = api if api is not None else client.CoreV1Api(api_client(kubeconfig, context))
    wanted_gateways, wanted_grpc = list(gateways), list(grpc_clients)
    current: dict[str, Any] = {}
    for item in core.list_namespaced_secret(namespace).items:
        # A listed object always has a name; the client's types allow None.
        name = item.metadata.name if item.metadata is not None else None
        if name is not None and name.startswith(SECRET_PREFIX):
            current[name] = item
    existing_ca = _pair_of(current.get(CA_SECRET))
    existing: dict[str, tuple[bytes, bytes]] = {}
    for name, item in current.items():
        found = _pair_of(item)
        if found is not None and name != CA_SECRET:
            existing[name.removeprefix(SECRET_PREFIX)] = found
    issued = renew(
        existing_ca,
        existing,
        server_names,
        wanted_gateways,
        wanted_grpc,
        days,
        trusted=_ca_of(current.get(CA_SECRET)) or b"",
        renew_before=renew_before,
        now=now,
    )
    ca = issued.authority.pair
    bundle = issued.trust_bundle
    report: list[tuple[str, str]] = []
    # The CA first: a pair signed by a CA not yet stored would be orphaned by a failure.
    entries = [(CA_SECRET, ca.certificate, ca.private_key, issued.authority_kept)] + [
        (secret_name(pair.name), pair.certificate, pair.private_key, kept)
        for pair, kept in issued.pairs
    ]
    for name, certificate, key, kept in entries:
        # Every Secret's ca.crt is the trust bundle: both CAs while a renewal overlaps.
        if not kept or _ca_of(current.get(name)) != bundle:
            body = _secret(client, namespace, name, certificate, key, bundle)
            if name in current:
                core.replace_namespaced_secret(name, namespace, body)
            else:
                core.create_namespaced_secret(namespace, body)
            report.append((f"{namespace}/{name}", "written"))
        else:
            report.append((f"{namespace}/{name}", "kept"))
    return report


def _pair_of(item: Any) -> tuple[bytes, bytes] | None:
    data = getattr(item, "data", None) or {}
    if "tls.crt" not in data or "tls.key" not in data:
        return None
    try:
        return base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])
    except ValueError:
        return None


def _ca_of(item: Any) -> bytes | None:
    data = getattr(item, "data", None) or {}
    try:
        return base64.b64decode(data["ca.crt"]) if "ca.crt" in data else None
    except ValueError:
        return None


def _secret(
    client: Any, namespace: str, name: str, certificate: bytes, key: bytes, ca: bytes
) -> Any:
    def encoded(value: bytes) -> str:
        return base64.b64encode(value).decode("ascii")

    return client.V1Secret(
        metadata=client.V1ObjectMeta(
            name=name, namespace=namespace, labels={MANAGED_LABEL: MANAGED_BY}
        ),
        type="kubernetes.io/tls",
        data={"tls.crt": encoded(certificate), "tls.key": encoded(key), "ca.crt": encoded(ca)},
    )
