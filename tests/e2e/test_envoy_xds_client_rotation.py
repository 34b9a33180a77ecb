"""Envoy's own xDS client certificate and CA rotate in place, as a mounted Secret does.

The files sit in a directory laid out like a Kubernetes Secret volume (`..data`, a symbolic
link to a timestamped directory, swapped by one rename); the bootstrap delivers them by
file-based SDS. Each test swaps Envoy's files, then restarts dragoman with material only the
new files fit, so that Envoy must reconnect with what it re-read: it does within seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, xds_tls_secret_files
from dragoman.security.certgen import (
    Authority,
    Pair,
    client_pair,
    new_authority,
    server_pair,
)
from dragoman.security.identities import FLEET, gateway_uri
from tests.support.harness import DragomanProcess, diagnostics, free_port, start_envoy
from tests.support.secret_volume import (
    client_files,
    server_arguments,
    swap_secret_volume,
    write_server_files,
)

GATEWAY = gateway_uri("default/e2e")  # the node cluster start_envoy gives
# Envoy retries a lost xDS stream with a backoff starting at 500 ms; dragoman starts in
# about a second. Generous for a busy machine, far below "never".
RECONNECT_S = 30


@dataclass
class World:
    root: Path
    volume: Path
    server_dir: Path
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def connected(self) -> bool:
        return self.envoy.stats().get("control_plane.connected_state") == 1

    def restart_dragoman(self, server: Pair, client_ca: Authority) -> None:
        self.dragoman.stop()
        write_server_files(self.server_dir, server, client_ca)
        self.dragoman.start()

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture
def authority() -> Authority:
    return new_authority("first CA")


@pytest.fixture
def world(tmp_path: Path, authority: Authority) -> Iterator[World]:
    (tmp_path / "manifests").mkdir()
    volume = tmp_path / "xds-tls"
    volume.mkdir()
    fleet = client_pair(authority, "fleet", FLEET)
    swap_secret_volume(volume, client_files(authority, fleet))
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    write_server_files(server_dir, server_pair(authority, ["localhost"]), authority)
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        tmp_path / "manifests",
        xds_address,
        tmp_path / "dragoman.log",
        extra_args=server_arguments(server_dir),
    )
    sds = tmp_path / "sds"
    sds.mkdir()
    tls = XdsClientTls(
        trusted_ca=str(volume / "ca.crt"),
        certificate=str(volume / "tls.crt"),
        private_key=str(volume / "tls.key"),
        server_name="localhost",
        sds_directory=str(sds),
    )
    for name, text in xds_tls_secret_files(tls).items():
        (sds / name).write_text(text)
    dragoman.start()
    envoy = start_envoy(tmp_path, xds_address, free_port(), xds_tls=tls)
    world = World(tmp_path, volume, server_dir, dragoman, envoy)
    try:
        try:
            wait_until(world.connected, timeout=60)
        except TimeoutError:
            pytest.fail("Envoy never connected over mutual TLS:\n" + world.diagnostics())
        yield world
    finally:
        envoy.stop()
        dragoman.stop()


def test_a_rotated_client_certificate_is_presented_on_reconnect(
    world: World, authority: Authority
) -> None:
    # The same CA, another identity: dragoman's log says which certificate Envoy presented.
    gateway = client_pair(authority, "gateway", GATEWAY)
    swap_secret_volume(world.volume, client_files(authority, gateway))
    world.restart_dragoman(server_pair(authority, ["localhost"]), authority)
    try:
        wait_until(
            lambda: world.connected() and f"identity={GATEWAY}" in world.dragoman.log(),
            timeout=RECONNECT_S,
        )
    except TimeoutError:
        pytest.fail("Envoy never reconnected with its new certificate:\n" + world.diagnostics())


def test_a_rotated_ca_and_certificate_reconnect_to_the_renewed_server(world: World) -> None:
    # dragoman, restarted, serves a certificate of a new CA and trusts only that CA: Envoy
    # gets in only with both its new ca.crt (validation context) and its new tls.crt.
    renewed = new_authority("second CA")
    fleet = client_pair(renewed, "fleet", FLEET)
    swap_secret_volume(world.volume, client_files(renewed, fleet))
    world.restart_dragoman(server_pair(renewed, ["localhost"]), renewed)
    try:
        wait_until(world.connected, timeout=RECONNECT_S)
    except TimeoutError:
        pytest.fail("Envoy never reconnected to the renewed dragoman:\n" + world.diagnostics())
