"""benchmarks/report.py on made-up figures: the targets are judged with their ratios, the
published anchors and the load average are in the Markdown, and the plots are SVG (or the
report says why there are none). benchmarks/gateway_bench.py's objects are valid ones."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.support.builders import service, typed

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def report() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))  # it imports the modules beside it
    try:
        import report

        yield report
    finally:
        sys.path.remove(str(BENCHMARKS))


def probe(routes: int, samples: list[float]) -> dict[str, Any]:
    return {
        "routes": routes,
        "samples_ms": samples,
        "new_route_errors": 0,
        "existing_non_200": 0,
        "existing_requests": 100,
        "connection_errors": 0,
        "load": [2.5, 2.0, 1.5],
    }


def fake_results() -> dict[str, Any]:
    change = {
        "mode": "manifests",
        "changes": 3,
        "requests": 4,
        "non_2xx": 1,
        "connection_errors": 0,
        "statuses": {"200": 3, "503": 1},
        "backends": {"a": 3},
        "counters_before_restart": {},
        "by_change": {"backend swapped to b": 1},
        "restart_errors": 0,
        "reapplied": {"cluster_manager.cluster_modified": 0},
        "achieved_rps": 199.0,
        "timeline": [[0.1, 1.0, 200], [0.2, 1.1, 200], [0.3, 2.0, 503], [0.4, 0.9, 200]],
        "change_times": [[0.15, "backend swapped to b"]],
        "restart_time": 0.35,
        "load": [2.5, 2.0, 1.5],
    }
    load = {
        "namespaces": 2,
        "per_namespace": 3,
        "churn_rate": 20.0,
        "churn_seconds": 3.0,
        "ready_s": 1.0,
        "changes": 60,
        "endpoint_ms": [5.0, 7.0, 150.0],
        "endpoint_timeouts": 0,
        "cpu_series": [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]],
        "rss_series": [[1.0, 90.0], [2.0, 91.0], [3.0, 92.0]],
        "envoy_idle_ms_per_s": 0.5,
        "envoy_ms_per_change": 0.3,
        "churn_cpu_percent": 5.5,
        "churn_rss_mib": 92.0,
        "probe": probe(6, [30.0, 31.0]),
        "load": [2.5, 2.0, 1.5],
    }
    fanout = (
        "S=  100 streams (SotW ADS, CDS only), 1000 clusters, 3 updates; initial responses 1 KiB\n"
        "  all streams received: median 0.020 s, p99 0.030 s   (median stream: 0.010 s)\n"
        "  server RSS: 50.0 MiB before clients, 60.0 MiB with all idle, peak 61.0 MiB; "
        "72.5 KiB per idle stream\n"
    )
    return {
        "profile": "quick",
        "machine": {"cpus": 2, "cpu": "test", "system": "Linux", "python": "3.11", "envoy": "1.40"},
        "load_before": [2.75, 2.5, 2.25],
        "load_after": [3.0, 2.5, 2.25],
        "seconds": 10.0,
        "runs": {
            "probe": {
                "command": "python benchmarks/gateway_bench.py probe --quick",
                "figures": {"probe": {"manifests": [probe(0, [10.0, 12.0]), probe(3000, [20.0])]}},
                "output": "",
                "returncode": 0,
                "seconds": 1.0,
                "load_before": [1, 1, 1],
                "load_after": [1, 1, 1],
            },
            "routechange": {"command": "c", "figures": {"routechange": [change]}},
            "route_load": {"command": "l", "figures": {"route_load": load}},
            "fanout": {
                "command": "python benchmarks/fanout.py --streams 100",
                "output": fanout,
                "returncode": 0,
                "seconds": 1.0,
                "load_before": [1, 1, 1],
                "load_after": [1, 1, 1],
            },
        },
    }


def test_the_report_judges_every_target_with_its_ratio(report: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    results = fake_results()
    text = report.write_report(results, out)
    assert out.read_text() == text
    judged = "\n".join(results["verdicts"])
    # R = 3,000 is judged, R = 0 is not (the target names 3,000); 20 ms is 1.33x 15 ms.
    assert "probe manifests R=3000 median ms: 20.0 against ≤ 15 → NOT met (1.33x" in judged
    assert "R=0 " not in judged
    assert "routechange manifests non-2xx + connection errors: 1 against 0 → NOT met" in judged
    assert "route-load dragoman CPU % of a core: 5.5 against ≤ 10 → met (0.55x" in judged
    assert "route-load endpoint change → Envoy p99 ms: 150.0 against ≤ 100 → NOT met" in judged
    assert "fan-out SotW ADS S=100 p99 s: 0.03 against ≤ 2 → met (0.01x" in judged
    assert "S=100 KiB" not in judged  # what a stream costs shows from S = 1,000 on
    for line in judged.splitlines():
        assert f"- {line}" in text
    assert "before: 2.75 2.5 2.25; after: 3.0 2.5 2.25" in text
    assert "| agentgateway (published) | 10-30 ms | 30 ms |" in text
    assert "| Envoy Gateway (published) | 600 ms | 2000 ms |" in text
    assert "{'backend swapped to b': 1}" in text
    assert "How this differs from gateway-api-bench" in text


def test_parts_run_again_say_when(report: ModuleType, tmp_path: Path) -> None:
    results = fake_results()
    results["run_again"] = {"fanout": "2026-01-02 03:04 UTC"}
    text = report.write_report(results, tmp_path / "benchmarks.md")
    assert "- `fanout` run again 2026-01-02 03:04 UTC (`--from ... --only fanout`)" in text


def test_plots_are_svg_or_the_report_says_there_are_none(
    report: ModuleType, tmp_path: Path
) -> None:
    text = report.write_report(fake_results(), tmp_path / "benchmarks.md")
    names = ("probe", "routechange", "churn", "fanout")
    if importlib.util.find_spec("matplotlib") is None:
        assert "No plots: matplotlib is not installed" in text
        assert not list((tmp_path / "benchmarks").glob("*.svg"))
        return
    for name in names:
        svg = (tmp_path / "benchmarks" / f"{name}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg
        assert f"(benchmarks/{name}.svg)" in text
    assert "agentgateway (published)" in (tmp_path / "benchmarks" / "probe.svg").read_text()


def test_the_benchmark_objects_are_valid(report: ModuleType) -> None:
    import gateway_bench

    route = gateway_bench.probe_route(7)
    assert route["spec"]["hostnames"] == ["7-route.example.com"]
    rules = route["spec"]["rules"]
    assert [r["matches"][0]["path"]["value"] for r in rules] == ["/7", "/"]
    assert [r["backendRefs"][0]["name"] for r in rules] == ["backend", "invalid-backend"]
    variants = gateway_bench.change_variants({"a": 1001, "a-alt": 1002, "b": 1003})
    assert len(variants) == 11
    for _label, objects in variants:
        assert len(typed(*objects)) == len(objects)


def test_the_benchmarks_api_server_runs_apart_and_stores_what_is_applied(
    report: ModuleType, tmp_path: Path
) -> None:
    """gateway_bench's test API server is a child process (its threads would stall the
    benchmark's loop): what it is told to apply is stored, as its own list/watch API says."""
    import gateway_bench

    api = gateway_bench.ApiServerProcess(tmp_path)
    try:
        assert api.child.pid != os.getpid() and api.child.poll() is None
        api.apply(service("one", 80), service("two", 81))
        config = yaml.safe_load(api.write_kubeconfig(tmp_path / "copy").read_text())
        server = config["clusters"][0]["cluster"]["server"]
        token = config["users"][0]["user"]["token"]
        asked = urllib.request.Request(
            f"{server}/api/v1/namespaces/default/services",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(asked, timeout=10) as answer:
            listed = json.loads(answer.read())
        names = sorted(item["metadata"]["name"] for item in listed["items"])
        assert names == ["one", "two"]
    finally:
        api.stop()
    assert api.child.poll() is not None  # stopped, by its own pid


def test_the_fleet_benchmarks_output_is_read_and_judged(report: ModuleType) -> None:
    propagation = (
        "== round 1: dragoman SotW: N = 10,000, 10 Envoys ==\n"
        "CPU per change, dragoman                   median 70 ms, p90 80 ms\n"
        "== round 1: SotW floor (the 'dragoman' lines: the floor server): "
        "N = 10,000, 10 Envoys ==\n"
        "CPU per change, dragoman                   median 20 ms, p90 20 ms\n"
        "== round 2: dragoman SotW: N = 10,000, 10 Envoys ==\n"
        "CPU per change, dragoman                   median 80 ms, p90 90 ms\n"
    )
    startup = (
        "== N = 10,000, files, SotW ==\n"
        "start -> all 10000 clusters served   wall  1.50 s   cpu  1.2 s   (load 1 1 1)\n"
        "== N = 2,000, files, SotW ==\n"
        "start -> all 2000 clusters served   wall  0.50 s   cpu  0.4 s   (load 1 1 1)\n"
        "== N = 10,000, one-file, SotW ==\n"
        "start -> all 10000 clusters served   wall  2.50 s   cpu  1.2 s   (load 1 1 1)\n"
        "start -> all 10000 clusters served   wall  1.70 s   cpu  1.2 s   (load 1 1 1)\n"
        "start -> all 10000 clusters served   wall  1.90 s   cpu  1.2 s   (load 1 1 1)\n"
        "median of 3                    wall  1.90 s   cpu  1.20 s\n"
    )
    assert report.parse_propagation(propagation) == {
        "services": 10_000,
        "envoys": 10,
        "dragoman_ms": [70.0, 80.0],
        "floor_ms": [20.0],
    }
    results = {"runs": {"propagation": {"output": propagation}, "startup": {"output": startup}}}
    assert report.fleet_verdicts(results) == [
        "SotW CPU per change, N=10,000, 10 Envoys, ms (the ideal server: 20 ms): "
        "75.0 against ≤ 35 → NOT met (2.14x the target)",
        # N = 2,000 has no target.
        "ready to serve, N=10,000 (files) s: 1.5 against ≤ 2 → met (0.75x the target)",
        # Several runs: their median.
        "ready to serve, N=10,000 (one-file) s: 1.9 against ≤ 2 → met (0.95x the target)",
    ]


def test_the_reconnect_storm_is_read_and_judged(report: ModuleType) -> None:
    storm = (
        "storm: S=10000 streams connecting at once (SotW ADS, CDS only), 1000 clusters, "
        "one well-behaved stream beside them, an update every 1 s\n"
        "  every stream served in full: 42.50 s (12 streams closed or refused by the server "
        "and opened again: 12 UNAVAILABLE)\n"
        "  well-behaved stream, 40 updates meanwhile: median 0.050 s, max 1.250 s\n"
        "  server RSS: 66.9 MiB before, peak 900.0 MiB during, 700.0 MiB with every stream idle\n"
    )
    assert report.parse_storm(storm) == {
        "streams": 10_000,
        "served_s": 42.5,
        "steady_max_s": 1.25,
    }
    assert report.fleet_verdicts({"runs": {"fanout_storm": {"output": storm}}}) == [
        "reconnect storm, S=10,000: every stream served, s: 42.5 against ≤ 60 → met "
        "(0.71x the target)",
        "reconnect storm, S=10,000: a well-behaved stream's update, max s: 1.25 against ≤ 1 "
        "→ NOT met (1.25x the target)",
    ]


def with_per_host(results: dict[str, Any]) -> dict[str, Any]:
    results["runs"]["probe_per_host"] = {
        "command": "python benchmarks/gateway_bench.py probe --quick --route-tables per-host",
        "figures": {
            "probe": {
                "manifests": [probe(0, [9.0]), probe(3000, [12.0, 14.0, 50.0])],
                "kubernetes": [probe(3000, [30.0])],
            },
            "route_tables": "per-host",
        },
        "output": "",
        "returncode": 0,
        "seconds": 1.0,
        "load_before": [1, 1, 1],
        "load_after": [1, 1, 1],
    }
    return results


def test_per_host_tables_are_judged_and_the_shared_table_shown_beside(
    report: ModuleType, tmp_path: Path
) -> None:
    results = with_per_host(fake_results())
    text = report.write_report(results, tmp_path / "benchmarks.md")
    judged = results["verdicts"]
    every = "\n".join(judged)
    per_host = "\nper-host route tables (judged): probe"
    assert judged[0] == per_host[1:] + " manifests R=3000 median ms: 14.0 against ≤ 15 → met " + (
        "(0.93x the target)"
    )
    assert f"{per_host} manifests R=3000 p99 ms: 50.0 against ≤ 40 → NOT met (1.25x" in every
    assert f"{per_host} kubernetes R=3000 median ms: 30.0 against ≤ 25 → NOT met" in every
    # The shared table's latencies are shown with their ratios, not judged; its errors are.
    assert (
        "shared route table: probe manifests R=3000 median ms: 20.0 (1.33x the target ≤ 15; "
        "shown, not judged)" in judged
    )
    assert "shared route table: probe manifests R=3000 errors: 0 against 0 → met" in judged
    assert not any("shared" in line and "NOT met" in line for line in judged)
    assert "R=0 " not in every
    assert "| manifests, per-host tables | 3,000 | 3 | 14.0 |" in text
    assert "| manifests | 3,000 | 1 | 20.0 |" in text
    assert "| dragoman, kubernetes, per-host tables (R = 3,000) | median 30.0 ms" in text
    assert "judged on the per-host figures" in text
    if importlib.util.find_spec("matplotlib") is not None:
        svg = (tmp_path / "benchmarks" / "probe.svg").read_text()
        assert "dragoman, manifests, per-host tables: median" in svg
        assert "dragoman, manifests: median" in svg


def test_route_load_with_per_host_tables_is_judged_and_the_shared_table_shown_beside(
    report: ModuleType, tmp_path: Path
) -> None:
    results = fake_results()
    shared = results["runs"]["route_load"]["figures"]["route_load"]
    per_host = dict(shared, churn_cpu_percent=4.0, endpoint_ms=[5.0, 6.0, 80.0])
    per_host["probe"] = probe(6, [12.0, 13.0])
    per_host["bench_stalls_ms"] = [45.0, 31.0]
    results["runs"]["route_load_per_host"] = {"command": "p", "figures": {"route_load": per_host}}
    text = report.write_report(results, tmp_path / "benchmarks.md")
    judged = results["verdicts"]
    assert (
        "per-host route tables (judged): route-load dragoman CPU % of a core: 4 against ≤ 10 "
        "→ met (0.40x the target)" in judged
    )
    assert (
        "per-host route tables (judged): route-load endpoint change → Envoy p99 ms: 80.0 "
        "against ≤ 100 → met (0.80x the target)" in judged
    )
    assert (
        "shared route table: route-load endpoint change → Envoy p99 ms: 150.0 (1.50x the "
        "target ≤ 100; shown, not judged)" in judged
    )
    assert "shared route table: route-load endpoint changes not seen within 10 s: 0" in (
        "\n".join(judged)
    )
    assert not any("shared" in line and "NOT met" in line for line in judged)
    assert "### Per-host route tables (judged)" in text and "### One route table (shown)" in text
    assert "| kubernetes, per-host tables, under churn | 6 | 2 | 12.5 |" in text
    assert "more than 30 ms late | 2 times, at most 45 ms" in (text)
    assert text.count("more than 30 ms late") == 1  # the shared run's figures predate it
    assert "| kubernetes, under churn | 6 | 2 | 30.5 |" in text


def test_figures_without_per_host_tables_are_judged_on_the_shared_table(
    report: ModuleType, tmp_path: Path
) -> None:
    results = fake_results()
    text = report.write_report(results, tmp_path / "benchmarks.md")
    assert results["verdicts"][0].startswith("probe manifests R=3000 median ms: 20.0 against")
    assert "per-host tables" not in text.split("## Reproduce")[0]


def test_a_saved_report_without_per_host_figures_is_written_again(
    report: ModuleType, tmp_path: Path
) -> None:
    """`--from` an older results.json (no per-host probe): the report is written from it, and
    the saved figures are left as they were."""
    saved = tmp_path / "benchmarks" / "results.json"
    saved.parent.mkdir()
    old = fake_results()
    saved.write_text(json.dumps(old))
    out = tmp_path / "out.md"
    assert report.main(["--from", str(saved), "--out", str(out)]) == 0
    assert "probe manifests R=3000 median ms: 20.0 against ≤ 15 → NOT met" in out.read_text()
    assert json.loads(saved.read_text()) == old
