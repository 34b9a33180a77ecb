"""Identity → what a client may receive: the rules, table-driven, and URI SAN parsing."""

from __future__ import annotations

import pytest

from dragoman.security.identities import (
    ADMIN,
    FLEET,
    Identity,
    Role,
    gateway_uri,
    grpc_uri,
    identity_of,
    parse_identity,
)
from dragoman.xds.transport.access_rules import Grant, Refusal, csds_access, xds_access

GATEWAY_A = parse_identity("spiffe://dragoman.dev/gateway/default/a")
GRPC = parse_identity("spiffe://dragoman.dev/grpc/greeter")
FLEET_ID = parse_identity(FLEET)
ADMIN_ID = parse_identity(ADMIN)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        (FLEET, Identity(Role.FLEET, FLEET)),
        (ADMIN, Identity(Role.ADMIN, ADMIN)),
        (
            "spiffe://dragoman.dev/gateway/default/a",
            Identity(Role.GATEWAY, "spiffe://dragoman.dev/gateway/default/a", "default/a"),
        ),
        ("spiffe://dragoman.dev/gateway/ns/gw.with.dots", Identity(
            Role.GATEWAY, "spiffe://dragoman.dev/gateway/ns/gw.with.dots", "ns/gw.with.dots"
        )),
        ("spiffe://dragoman.dev/grpc/greeter", Identity(Role.GRPC, "spiffe://dragoman.dev/grpc/greeter")),
        # Not dragoman's, or malformed: no identity at all.
        ("spiffe://example.com/fleet", None),
        ("spiffe://dragoman.dev/fleet/", None),
        ("spiffe://dragoman.dev/FLEET", None),
        ("spiffe://dragoman.dev/gateway/default", None),
        ("spiffe://dragoman.dev/gateway/default/a/b", None),
        ("spiffe://dragoman.dev/gateway/Default/a", None),
        ("spiffe://dragoman.dev/gateway/default/../b", None),
        ("spiffe://dragoman.dev/gateway//a", None),
        ("spiffe://dragoman.dev/grpc/", None),
        ("spiffe://dragoman.dev/grpc/a\nb", None),
        ("spiffe://dragoman.dev/admin\x00", None),
        ("", None),
    ],
)  # fmt: skip
def test_parse_identity(uri: str, expected: Identity | None) -> None:
    assert parse_identity(uri) == expected


def test_a_certificate_naming_two_identities_has_none() -> None:
    assert identity_of([FLEET, ADMIN]) is None
    assert identity_of([FLEET, FLEET, "https://example.com"]) == FLEET_ID
    assert identity_of([]) is None


def test_uris_made_for_certificates_parse_back() -> None:
    assert parse_identity(gateway_uri("default/a")) == GATEWAY_A
    assert parse_identity(grpc_uri("greeter")) == GRPC
    for bad in ("default", "default/a/b", "Default/a", ""):
        with pytest.raises(ValueError):
            gateway_uri(bad)


@pytest.mark.parametrize(
    ("identity", "authenticated", "cluster", "grpc_client", "expected"),
    [
        # Plaintext (loopback, or --xds-insecure): no identity, everything as before.
        (None, False, "default/b", False, Grant()),
        # Mutual TLS.
        (FLEET_ID, True, "default/b", False, Grant()),
        (FLEET_ID, True, "", True, Grant()),
        (GATEWAY_A, True, "default/a", False, Grant(group="default/a")),
        (GATEWAY_A, True, "default/a", True, Grant(group="default/a")),
        (GATEWAY_A, True, "default/b", False, Refusal),
        (GATEWAY_A, True, "", False, Refusal),
        (GATEWAY_A, True, "default/a ", False, Refusal),
        (GRPC, True, "default/a", True, Grant()),
        (GRPC, True, "default/a", False, Refusal),
        (ADMIN_ID, True, "", False, Refusal),
        (None, True, "", False, Refusal),
    ],
)
def test_xds_access(
    identity: Identity | None,
    authenticated: bool,
    cluster: str,
    grpc_client: bool,
    expected: Grant | type[Refusal],
) -> None:
    decided = xds_access(identity, authenticated, cluster, grpc_client)
    if expected is Refusal:
        assert isinstance(decided, Refusal)
        assert (
            str(identity) in decided.message
            if identity
            else "no dragoman identity" in (decided.message)
        )
    else:
        assert decided == expected


def test_a_refusal_names_the_identity_and_the_claim() -> None:
    decided = xds_access(GATEWAY_A, True, "default/b", False)
    assert isinstance(decided, Refusal)
    assert "spiffe://dragoman.dev/gateway/default/a" in decided.message
    assert "'default/b'" in decided.message


def test_only_admin_may_use_csds_over_tls() -> None:
    assert csds_access(None, False) is None  # plaintext on loopback
    assert csds_access(ADMIN_ID, True) is None
    for identity in (FLEET_ID, GATEWAY_A, GRPC, None):
        refusal = csds_access(identity, True)
        assert isinstance(refusal, Refusal)
        assert "spiffe://dragoman.dev/admin" in refusal.message
