"""benchmarks/propagation.py: the ports it binds by number cannot be taken meanwhile, the prober
says what it met when it cannot reach an Envoy, and a small run of both protocols, one after
the other, goes through real Envoys with its memory and CPU figures read the honest way."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.envoy_dags import envoy_binary

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "propagation.py"


@pytest.fixture(scope="module")
def propagation() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))  # it imports the modules beside it
    try:
        import propagation

        yield propagation
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_ports_are_picked_below_the_ephemeral_range_and_never_twice(
    propagation: ModuleType,
) -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    picked = [propagation.free_port_everywhere(2) for _ in range(40)]
    assert len(set(picked)) == len(picked)
    assert all(propagation.LOWEST_PORT <= port < low for port in picked)
    hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.11", "127.0.0.12"]
    for port in picked[:5]:
        for host in hosts:
            with socket.socket() as s:
                s.bind((host, port))


def test_a_port_in_use_on_any_host_is_not_picked(
    propagation: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two candidate ports; a backend address of the first is in use.
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        busy = socket.socket()
        try:
            busy.bind(("127.0.0.11", port))
        except OSError:
            busy.close()
            continue
        try:
            with socket.socket() as other:
                other.bind(("127.0.0.1", port + 1))
        except OSError:
            busy.close()
            continue
        break
    else:
        pytest.fail("no two adjacent free ports found")
    try:
        monkeypatch.setattr(propagation, "LOWEST_PORT", port)
        monkeypatch.setattr(propagation, "_ephemeral_low", lambda: port + 2)
        monkeypatch.setattr(propagation, "_picked", set())
        assert propagation.free_port_everywhere(1) == port + 1
        with pytest.raises(RuntimeError, match="no free port"):
            propagation.free_port_everywhere(1)  # the other was picked already
    finally:
        busy.close()


def test_the_prober_names_what_it_met_instead_of_an_envoy(propagation: ModuleType) -> None:
    async def scenario() -> tuple[str, str]:
        async def no_route(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 8\r\n\r\nno route")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(no_route, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(TimeoutError) as answered:
                await propagation.connect_to_each(1, port, "svc0.bench.test", timeout=0.5)
        finally:
            server.close()
            await server.wait_closed()
        with pytest.raises(TimeoutError) as refused:
            await propagation.connect_to_each(1, port, "svc0.bench.test", timeout=0.3)
        return str(answered.value), str(refused.value)

    answered, refused = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert "reached Envoys [] only" in answered and "404 'no route' x" in answered
    assert "connect: " in refused


def test_both_protocols_one_after_the_other_through_real_envoys() -> None:
    envoy_binary()  # the run needs it beside this Python
    command = [sys.executable, str(SCRIPT), "--services", "30", "--envoys", "2"]
    command += ["--changes", "2", "--both", "--idle-seconds", "0.5", "--pause", "0.2"]
    command += ["--quiet-seconds", "0.5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = done.stdout
    assert "== dragoman SotW: N = 30, 2 Envoys ==" in out
    assert "== dragoman delta: N = 30, 2 Envoys ==" in out
    for phase in out.split("== dragoman ")[1:]:
        assert "(2 changes)" in phase
        assert "right after the last (before the trim)" in phase
        assert "after the allocator trim" in phase
        assert "RSS after the same changes, 1 Envoy" in phase
        assert "RSS per extra Envoy, after the changes" in phase
        assert "non-200 answers during changes             0" in phase
        # Raw CPU, never less an idle rate: no figure below zero.
        cpu = re.search(r"each Envoy's main thread   median (-?\d+) ms, p90 (-?\d+) ms", phase)
        assert cpu is not None, phase
        assert int(cpu.group(1)) >= 0 and int(cpu.group(2)) >= 0
