"""benchmarks/fanout.py's command line: several S, each run in its own process with exactly
the options asked for (its figures are printed, never asserted)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fanout.py"


def fanout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fanout_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_each_scenario_runs_with_exactly_its_own_options() -> None:
    bench = fanout()
    args = bench.parser().parse_args(
        ["--streams", "100", "--streams", "1000", "--delta", "--clusters", "50", "--eds"]
    )
    wanted = bench.scenarios(args)
    assert [(s.streams, s.delta, s.eds, s.clusters) for s in wanted] == [
        (100, True, True, 50),
        (1000, True, True, 50),
    ]
    for scenario in wanted:
        again = bench.scenarios(bench.parser().parse_args(bench.scenario_args(scenario)))
        assert again == [scenario]


def test_tls_both_runs_each_scenario_in_plaintext_then_over_mutual_tls() -> None:
    bench = fanout()
    wanted = bench.scenarios(bench.parser().parse_args(["--streams", "10", "--tls", "both"]))
    assert [s.tls for s in wanted] == [False, True]
    for scenario in wanted:
        again = bench.scenarios(bench.parser().parse_args(bench.scenario_args(scenario)))
        assert again == [scenario]


def test_a_tls_scenario_runs(tmp_path: Path) -> None:
    command = [sys.executable, str(SCRIPT), "--streams", "2", "--clusters", "10"]
    command += ["--updates", "1", "--workers", "1", "--tls", "on"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "S=    2 streams (SotW ADS, mTLS, CDS only)" in done.stdout


def test_the_matrix_is_every_protocol_with_and_without_eds() -> None:
    bench = fanout()
    wanted = bench.scenarios(bench.parser().parse_args(["--matrix", "--streams", "10"]))
    assert {(s.delta, s.eds) for s in wanted} == {
        (False, False),
        (True, False),
        (False, True),
        (True, True),
    }


def test_several_stream_counts_run_one_after_the_other() -> None:
    command = [sys.executable, str(SCRIPT), "--streams", "2", "--streams", "3"]
    command += ["--clusters", "10", "--updates", "1", "--workers", "1", "--eds"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    headlines = [line for line in done.stdout.splitlines() if line.startswith("S=")]
    assert len(headlines) == 2, done.stdout
    assert headlines[0].startswith("S=    2 streams (SotW ADS, CDS + every CLA by name)")
    assert headlines[1].startswith("S=    3 streams")


def test_a_reconnect_storm_runs_and_reports_every_stream_served() -> None:
    command = [sys.executable, str(SCRIPT), "--storm", "--streams", "5", "--clusters", "10"]
    command += ["--workers", "2", "--delta"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("storm: S=    5 streams connecting at once (delta ADS")
    assert "each naming what it held" in done.stdout
    assert "every stream served in full:" in done.stdout
    assert "server RSS:" in done.stdout


def test_the_storm_option_survives_the_hand_over_to_a_child_process() -> None:
    bench = fanout()
    options = ["--streams", "10", "--storm", "--storm-fresh"]
    wanted = bench.scenarios(bench.parser().parse_args(options))
    assert [(s.storm, s.storm_fresh) for s in wanted] == [(True, True)]
    again = bench.scenarios(bench.parser().parse_args(bench.scenario_args(wanted[0])))
    assert again == wanted


def test_a_held_request_serialized_once_merges_with_each_streams_own_fields() -> None:
    bench = fanout()
    held = bench.holding({bench.CLUSTER: {"a": "v1", "b": "v2"}})
    own = DeltaDiscoveryRequest(type_url=bench.CLUSTER, node=Node(id="e1"))
    sent = DeltaDiscoveryRequest.FromString(held[bench.CLUSTER] + bench.serialized(own))
    assert dict(sent.initial_resource_versions) == {"a": "v1", "b": "v2"}
    assert sent.node.id == "e1" and sent.type_url == bench.CLUSTER


def test_a_version_the_steady_stream_skipped_counts_until_a_later_one_arrived() -> None:
    bench = fanout()
    published = [("v1", 10.0), ("v2", 10.5), ("v3", 11.0)]
    # v1 was superseded before it was sent; v3 never arrived.
    latencies, missed = bench._steady_latencies(published, {"v2": [10.7, 10.9]})
    assert latencies == [10.7 - 10.0, 10.7 - 10.5]
    assert missed == 1


def test_a_client_keeps_the_version_type_and_nonce_of_either_response() -> None:
    """What a client parses of a response: the three fields both messages number alike."""
    from envoy.service.discovery.v3.discovery_pb2 import (
        DeltaDiscoveryResponse,
        DiscoveryResponse,
        Resource,
    )

    bench = fanout()
    sotw = DiscoveryResponse(version_info="v1", type_url="t", nonce="3")
    sotw.resources.add().value = b"x" * 1000
    delta = DeltaDiscoveryResponse(system_version_info="v2", type_url="u", nonce="4")
    delta.resources.append(Resource(name="a", version="d"))
    delta.removed_resources.append("gone")
    assert bench.response_head(sotw.SerializeToString()) == ("v1", "t", "3")
    assert bench.response_head(delta.SerializeToString()) == ("v2", "u", "4")
