"""The four transports: bootstraps for ADS or per-type streams, SotW or delta, and the
resources per-type clients are served (EDS and RDS config sources on per-type streams)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)

from dragoman import cli
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy import translate
from dragoman.envoy.bootstrap.envoy_bootstrap import (
    XDS_CLUSTER,
    bootstrap_config,
    bootstrap_message,
)
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from tests.support.envoy_checks import problems_in, validate
from tests.support.envoy_dags import envoy_binary, every_kind_of_dag
from tests.support.xds_builders import (
    dns_cluster,
    eds_cluster,
    endpoints,
    listener,
    per_type_snapshot,
    routes,
    snapshot,
)

TRANSPORTS = [("ads", False), ("ads", True), ("per-type", False), ("per-type", True)]
IDS = ["ads", "ads-delta", "per-type", "per-type-delta"]
PER_TYPE = pytest.mark.parametrize(
    ("sources", "api_type"),
    [(ConfigSources.PER_TYPE_SOTW, "GRPC"), (ConfigSources.PER_TYPE_DELTA, "DELTA_GRPC")],
    ids=["sotw", "delta"],
)


def dynamic(transport: str, delta: bool) -> dict:
    config = bootstrap_config(
        "127.0.0.1:18000",
        node_id="e",
        node_cluster="default/gw",
        xds_transport=transport,  # type: ignore[arg-type]
        delta=delta,
    )
    return config["dynamic_resources"]


def per_type_source(api_type: str) -> dict:
    return {
        "api_config_source": {
            "api_type": api_type,
            "transport_api_version": "V3",
            "grpc_services": [{"envoy_grpc": {"cluster_name": XDS_CLUSTER}}],
            "set_node_on_first_message_only": True,
        },
        "resource_api_version": "V3",
    }


# Bootstraps.


def test_default_bootstrap_is_ads_state_of_the_world() -> None:
    config = dynamic("ads", False)
    assert config["ads_config"]["api_type"] == "GRPC"
    assert config["cds_config"] == config["lds_config"] == {"ads": {}, "resource_api_version": "V3"}
    default = bootstrap_config("127.0.0.1:18000", node_id="e", node_cluster="")
    assert default["dynamic_resources"] == config


def test_ads_delta_bootstrap_uses_delta_grpc_for_the_ads_stream() -> None:
    config = dynamic("ads", True)
    assert config["ads_config"]["api_type"] == "DELTA_GRPC"
    assert config["cds_config"] == {"ads": {}, "resource_api_version": "V3"}


@pytest.mark.parametrize(("delta", "api_type"), [(False, "GRPC"), (True, "DELTA_GRPC")])
def test_per_type_bootstrap_has_no_ads_and_a_stream_per_type(delta: bool, api_type: str) -> None:
    config = dynamic("per-type", delta)
    assert "ads_config" not in config
    assert config["cds_config"] == config["lds_config"] == per_type_source(api_type)


def test_per_type_bootstrap_needs_a_node_cluster() -> None:
    with pytest.raises(ValueError, match=r"node\.cluster"):
        bootstrap_message("127.0.0.1:1", node_id="e", node_cluster="", xds_transport="per-type")


def test_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="xds_transport"):
        bootstrap_message("127.0.0.1:1", node_id="e", node_cluster="", xds_transport="rest")  # type: ignore[arg-type]


def test_bootstrap_command_transport_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bootstrap", "--xds-transport", "per-type", "--delta"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["dynamic_resources"]["cds_config"] == per_type_source("DELTA_GRPC")
    assert cli.main(["bootstrap"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["dynamic_resources"]["ads_config"]


@pytest.mark.parametrize(("transport", "delta"), TRANSPORTS, ids=IDS)
def test_envoy_accepts_every_transport_bootstrap(
    tmp_path: Path, transport: str, delta: bool
) -> None:
    config = bootstrap_config(
        "127.0.0.1:18000",
        node_id="e",
        node_cluster="default/gw",
        admin_socket=str(tmp_path / "admin.sock"),
        xds_transport=transport,  # type: ignore[arg-type]
        delta=delta,
    )
    path = tmp_path / "bootstrap.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy_binary(), path)


@pytest.mark.parametrize(("transport", "delta"), TRANSPORTS, ids=IDS)
def test_no_deprecated_field_in_transport_bootstraps(transport: str, delta: bool) -> None:
    message = bootstrap_message(
        "dragoman:18000",
        node_id="e",
        node_cluster="dragoman",
        xds_transport=transport,  # type: ignore[arg-type]
        delta=delta,
    )
    assert list(problems_in(message, "bootstrap")) == []


# Resources for per-type clients.


@PER_TYPE
def test_per_type_clients_get_eds_config_sources_on_their_own_streams(
    sources: ConfigSources, api_type: str
) -> None:
    original = snapshot(
        clusters=[eds_cluster("a"), dns_cluster("ext", "api.example.com")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a")],
    )
    served = per_type_snapshot(original, sources)
    clusters = served.of_type(CLUSTER).resources
    eds = Cluster.FromString(clusters["a"].body)
    assert to_json_mapping(eds.eds_cluster_config.eds_config) == per_type_source(api_type)
    # What has no ADS config source is served as it is, the very same resource.
    assert clusters["ext"] is original.of_type(CLUSTER).resources["ext"]
    for type_url in (ENDPOINT, ROUTE):
        assert served.of_type(type_url) is original.of_type(type_url)
    # Versions stay content hashes of what is actually sent.
    assert served.of_type(CLUSTER).version != original.of_type(CLUSTER).version
    assert per_type_snapshot(original, sources).of_type(CLUSTER) is served.of_type(CLUSTER)


@PER_TYPE
def test_per_type_clients_get_rds_config_sources_on_their_own_streams(
    sources: ConfigSources, api_type: str
) -> None:
    original = snapshot(listeners=[listener("http", "routes-http")])
    served = per_type_snapshot(original, sources)
    body = served.of_type(LISTENER).resources["http"].body
    chain = Listener.FromString(body).filter_chains[0]
    manager = hcm.HttpConnectionManager.FromString(chain.filters[0].typed_config.value)
    assert manager.rds.route_config_name == "routes-http"
    assert to_json_mapping(manager.rds.config_source) == per_type_source(api_type)


def test_ads_clients_get_the_snapshot_as_translated() -> None:
    async def scenario() -> None:
        original = snapshot(clusters=[eds_cluster("a")])
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: original})
        assert cache.snapshot_for(ALL_GATEWAYS, ConfigSources.ADS) is original
        assert cache.snapshot_for(ALL_GATEWAYS) is original

    asyncio.run(scenario())


def test_a_cache_without_a_per_type_variant_refuses_per_type_clients() -> None:
    async def scenario() -> None:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        with pytest.raises(RuntimeError, match="ADS clients only"):
            cache.snapshot_for(ALL_GATEWAYS, ConfigSources.PER_TYPE_SOTW)

    asyncio.run(scenario())


@PER_TYPE
def test_per_type_translated_resources_have_nothing_deprecated_and_envoy_accepts_them(
    tmp_path: Path, sources: ConfigSources, api_type: str
) -> None:
    from envoy.config.endpoint.v3.endpoint_pb2 import ClusterLoadAssignment

    from tests.support.envoy_checks import static_copy

    classes = {CLUSTER: Cluster, ENDPOINT: ClusterLoadAssignment}
    for group, translated in translate(every_kind_of_dag()).items():
        served = per_type_snapshot(translated, sources)
        config = bootstrap_config(
            "127.0.0.1:18000",
            node_id="e",
            node_cluster=group or "dragoman",
            admin_socket=str(tmp_path / "admin.sock"),
            xds_transport="per-type",
            delta=sources is ConfigSources.PER_TYPE_DELTA,
        )
        static = config["static_resources"]
        for type_url in (CLUSTER, ENDPOINT):
            for name, resource in served.of_type(type_url).resources.items():
                message = classes[type_url].FromString(resource.body)
                assert list(problems_in(message, name)) == []
                if type_url == CLUSTER:
                    static["clusters"].append(to_json_mapping(message))
                else:
                    static["clusters"].append(static_copy(message))
        path = tmp_path / f"{group.replace('/', '_') or 'all'}.yaml"
        path.write_text(dump_yaml(config))
        validate(envoy_binary(), path)


def test_cache_makes_each_variant_once_per_snapshot() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        first = cache.snapshot_for(ALL_GATEWAYS, ConfigSources.PER_TYPE_SOTW)
        assert cache.snapshot_for(ALL_GATEWAYS, ConfigSources.PER_TYPE_SOTW) is first
        assert cache.snapshot_for(ALL_GATEWAYS, ConfigSources.PER_TYPE_DELTA) is not first
        cache.set_snapshot(ALL_GATEWAYS, snapshot(clusters=[eds_cluster("b")]))
        after = cache.snapshot_for(ALL_GATEWAYS, ConfigSources.PER_TYPE_SOTW)
        assert list(after.of_type(CLUSTER).resources) == ["b"]

    asyncio.run(scenario())
