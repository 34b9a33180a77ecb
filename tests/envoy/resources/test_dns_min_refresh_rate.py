"""DnsCluster.dns_min_refresh_rate, which Envoy 1.40 reads and the generated protos lack:
written by field number, read by Envoy as that field (its own validation proves it), shown
by `render`, and absent unless asked for."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2

from dragoman.envoy.resources.dns_cluster_type import dns_cluster_type
from dragoman.envoy.resources.endpoint_messages import fill_single_host_assignment
from dragoman.envoy.text.json_mapping import to_json_mapping
from tests.support.envoy_dags import envoy_binary


def cluster(min_refresh_s: float | None) -> cluster_pb2.Cluster:
    message = cluster_pb2.Cluster(
        name="ext",
        cluster_type=dns_cluster_type(
            refresh_s=30, respect_ttl=True, lookup_family="ALL", min_refresh_s=min_refresh_s
        ),
    )
    fill_single_host_assignment(message.load_assignment, "ext", "api.example.com", 443)
    return message


def test_absent_unless_asked_for() -> None:
    plain = dns_cluster_type(refresh_s=30, respect_ttl=True, lookup_family="ALL")
    assert cluster(None).cluster_type == plain
    assert "dns_min_refresh_rate" not in str(to_json_mapping(cluster(None)))


def test_render_shows_it_as_envoy_names_it() -> None:
    shown = to_json_mapping(cluster(7.5))["cluster_type"]["typed_config"]
    assert shown["dns_min_refresh_rate"] == "7.500s"
    assert shown["dns_refresh_rate"] == "30s"  # the known fields as before
    settings = dns_cluster_pb2.DnsCluster()
    assert cluster(7.5).cluster_type.typed_config.Unpack(settings)
    assert settings.dns_refresh_rate.seconds == 30


def validate_binary(tmp_path: Path, message: cluster_pb2.Cluster) -> tuple[int, str]:
    path = tmp_path / "bootstrap.pb"
    bootstrap = bootstrap_pb2.Bootstrap()
    bootstrap.static_resources.clusters.append(message)
    path.write_bytes(bootstrap.SerializeToString())
    result = subprocess.run(
        [envoy_binary(), "--mode", "validate", "--disable-hot-restart", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def test_envoy_reads_the_field_by_its_number(tmp_path: Path) -> None:
    code, output = validate_binary(tmp_path, cluster(7))
    assert code == 0, output


def test_envoy_applies_its_own_bound_to_it(tmp_path: Path) -> None:
    """A negative control: Envoy refuses the value it bounds, naming the field: the bytes
    are its dns_min_refresh_rate (dragoman itself never writes less than 1s)."""
    code, output = validate_binary(tmp_path, cluster(0.5))
    assert code != 0 and "DnsMinRefreshRate" in output, output
