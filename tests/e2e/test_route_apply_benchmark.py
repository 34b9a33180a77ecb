"""benchmarks/route_apply.py at a tiny size: every design serves an added host through a real
Envoy, and what Envoy (and a proxyless gRPC client) does with scope keys and VHDS is what the
design note says."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))  # it imports gateway_bench.py and propagation.py
    try:
        import route_apply

        yield route_apply
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def args(bench: ModuleType) -> Iterator[object]:
    """The benchmark's options at a tiny size, with its echo backend running."""
    parsed = bench.parser().parse_args(["--samples", "2", "--settle", "0", "--gap", "0"])
    parsed.backend_port = bench.free_port(("127.0.0.1", bench.gb.BACKEND_A))
    backends = bench.gb.start_backends({"backend": (bench.gb.BACKEND_A, parsed.backend_port)})
    try:
        yield parsed
    finally:
        bench.stop(backends)


def test_every_design_serves_an_added_host(bench: ModuleType, args: object, tmp_path: Path) -> None:
    async def run() -> list:
        return [await bench.measure(d, 3, args, tmp_path) for d in bench.DESIGNS.values()]

    results = asyncio.run(run())
    assert [f.design for f in results] == list(bench.DESIGNS)
    for figures in results:
        assert len(figures.first_200_ms) == 2, figures.design
        assert all(0 < ms < 30_000 for ms in figures.first_200_ms)
        assert len(figures.acked_ms) == 2 and len(figures.main_cpu_ms) == 2
        assert (figures.timeouts, figures.nacks, figures.non_404) == (0, 0, 0), figures
        assert figures.allocated_mib > 0
    by_name = {f.design: f for f in results}
    # On demand, Envoy asks for each added host (when pushed, only a request that comes
    # before the push does); no other design asks for virtual hosts.
    assert by_name["vhds-delta"].on_demand_requests == 2
    assert all(f.on_demand_requests == 0 for f in results if not f.design.startswith("vhds"))
    table = bench.table(results)
    assert "srds-inline-delta" in table and "x rds" in table


def test_scope_keys_are_exact_and_vhds_needs_delta(
    bench: ModuleType, args: object, tmp_path: Path
) -> None:
    checks = asyncio.run(bench.run_checks(args, tmp_path))
    host = bench.host_name(1)
    for scoped in checks[:2]:  # the key from `:authority`, then from `host`: the same
        assert scoped.nacks == []
        assert scoped.status(host, "/1") == 200
        assert scoped.status(f"{host}:8080", "/1") == 200  # the port is dropped
        assert scoped.status(host.upper(), "/1") == 404  # keys are case-sensitive
        assert scoped.status("other.example.com", "/2") == 404  # no wildcard scope
        assert scoped.status("unknown.test", "/3") == 404  # no fallback scope
        assert scoped.status("*.example.com", "/2") == 200  # a key is a literal
    plain = checks[2]
    assert plain.status(host.upper(), "/1") == 200  # domains ignore case
    sotw, delta, grpc_client = checks[3], checks[4], checks[5]
    assert any("DELTA_GRPC" in nack for nack in sotw.nacks)
    assert sotw.status(host, "/1") == 404
    assert delta.nacks == []
    assert delta.status(bench.host_name(5).upper(), "/5") == 200
    assert delta.status(f"{bench.host_name(6)}:8080", "/6") == 200
    assert delta.status(bench.host_name(7), "/7") == 404  # an alias without a body
    assert delta.status(bench.host_name(8), "/8") == 0  # a removal: the request waits
    # Envoy asks for a host it lacks in lower case, with the port it was given.
    route = bench.ROUTE_NAME
    assert delta.asked == [
        f"{route}/{bench.host_name(5)}",
        f"{route}/{bench.host_name(6)}:8080",
        f"{route}/{bench.host_name(7)}",
        f"{route}/{bench.host_name(8)}",
    ]
    # A proxyless gRPC client rejects an API listener whose routes come from scopes, and
    # takes the one whose routes come over RDS.
    assert grpc_client.nacks
    assert all("scoped.test:80" in nack and "plain.test" not in nack for nack in grpc_client.nacks)
    assert "neither route_config nor rds" in grpc_client.nacks[0]
