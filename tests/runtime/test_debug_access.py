"""Who may read the debug pages: they name every route, cluster and client, so by default
only loopback peers (`kubectl port-forward`) see them, while probes and scrapes on the same
port answer anyone."""

from __future__ import annotations

import pytest

from dragoman.runtime.ops_server import OpsServer, _route, is_loopback_peer


def ops_server(debug_remote: bool) -> OpsServer:
    def no_view():
        raise AssertionError("a refused request must not take the debug view")

    return OpsServer(
        "127.0.0.1:0",
        live=lambda: "",
        ready=lambda: "",
        debug_view=no_view,
        debug_remote=debug_remote,
    )


@pytest.mark.parametrize(
    ("peer", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.5", False),
        ("192.168.1.20", False),
        ("::ffff:10.0.0.5", False),
        ("fe80::1%eth0", False),
        ("2001:db8::1", False),
        ("", False),
        ("not an address", False),
    ],
)
def test_loopback_peers_are_told_apart(peer: str, loopback: bool) -> None:
    assert is_loopback_peer(peer) is loopback


@pytest.mark.parametrize("path", ["/debug", "/debug/dag", "/debug/config", "/debug/"])
def test_debug_pages_refuse_peers_off_loopback_by_default(path: str) -> None:
    status, content_type, body = _route(ops_server(debug_remote=False), path, peer="10.0.0.5")
    assert status == 403
    assert content_type.startswith("text/plain")
    assert b"kubectl port-forward" in body and b"--debug-remote" in body


def test_probes_answer_any_peer() -> None:
    ops = ops_server(debug_remote=False)
    for path in ("/healthz", "/readyz"):
        assert _route(ops, path, peer="10.0.0.5")[0] == 200


def test_debug_remote_lets_other_peers_reach_the_pages() -> None:
    # An unknown debug page is a 404 reached without taking the view: past the peer check.
    status, _, _ = _route(ops_server(debug_remote=True), "/debug/nowhere", peer="10.0.0.5")
    assert status == 404
    status, _, _ = _route(ops_server(debug_remote=False), "/debug/nowhere", peer="10.0.0.5")
    assert status == 403
