"""The Envoy bootstrap that connects a proxy to dragoman."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dragoman.envoy.bootstrap.envoy_bootstrap import (
    XDS_CLUSTER,
    bootstrap_config,
    bootstrap_yaml,
    split_host_port,
)

EXAMPLE = Path(__file__).parents[3] / "examples" / "envoy" / "bootstrap.yaml"


def xds_cluster(config: dict) -> dict:
    (cluster,) = config["static_resources"]["clusters"]
    assert cluster["name"] == XDS_CLUSTER
    return cluster


def test_ip_literal_control_plane_is_a_static_http2_cluster() -> None:
    config = bootstrap_config("127.0.0.1:18000", node_id="e1", node_cluster="default/demo")

    assert config["node"] == {"id": "e1", "cluster": "default/demo"}
    cluster = xds_cluster(config)
    assert cluster["type"] == "STATIC"
    assert "cluster_type" not in cluster
    (endpoint,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert endpoint["endpoint"]["address"]["socket_address"] == {
        "address": "127.0.0.1",
        "port_value": 18000,
    }
    options = cluster["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert "http2_protocol_options" in options["explicit_http_config"]


def test_named_control_plane_is_resolved_through_the_dns_extension() -> None:
    cluster = xds_cluster(
        bootstrap_config("dragoman:18000", node_id="e1", node_cluster="default/demo")
    )

    assert "type" not in cluster
    assert cluster["cluster_type"]["name"] == "envoy.cluster.dns"
    (endpoint,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert endpoint["endpoint"]["address"]["socket_address"]["address"] == "dragoman"


def test_everything_else_comes_over_ads() -> None:
    dynamic = bootstrap_config("[::1]:18000", node_id="e1", node_cluster="")["dynamic_resources"]

    ads = dynamic["ads_config"]
    assert ads["api_type"] == "GRPC"
    assert ads["transport_api_version"] == "V3"
    assert ads["grpc_services"] == [{"envoy_grpc": {"cluster_name": XDS_CLUSTER}}]
    assert ads["set_node_on_first_message_only"] is True
    for key in ("cds_config", "lds_config"):
        assert dynamic[key] == {"ads": {}, "resource_api_version": "V3"}


@pytest.mark.parametrize(("socket", "has_admin"), [("/run/envoy/admin.sock", True), (None, False)])
def test_admin_is_only_ever_a_unix_socket(socket: str | None, has_admin: bool) -> None:
    config = bootstrap_config("127.0.0.1:18000", node_id="e1", node_cluster="", admin_socket=socket)

    assert ("admin" in config) is has_admin
    if has_admin:
        assert config["admin"] == {"address": {"pipe": {"path": socket}}}


def test_dns_resolvers_become_the_default_cares_resolver() -> None:
    config = bootstrap_config(
        "dragoman:18000",
        node_id="e1",
        node_cluster="",
        dns_resolvers=["127.0.0.1:5353", "10.0.0.10", "[::1]:53"],
        dns_use_tcp=True,
    )

    resolver = config["typed_dns_resolver_config"]
    assert resolver["name"] == "envoy.network.dns_resolver.cares"
    settings = resolver["typed_config"]
    assert [r["socket_address"] for r in settings["resolvers"]] == [
        {"protocol": "UDP", "address": "127.0.0.1", "port_value": 5353},
        {"protocol": "UDP", "address": "10.0.0.10", "port_value": 53},
        {"protocol": "UDP", "address": "::1", "port_value": 53},
    ]
    assert settings["dns_resolver_options"] == {
        "use_tcp_for_dns_lookups": True,
        "no_default_search_domain": True,
    }
    # The control plane itself is still found with the system's resolver and search domains.
    xds_dns = xds_cluster(config)["cluster_type"]["typed_config"]
    system = xds_dns["typed_dns_resolver_config"]["typed_config"]
    assert "resolvers" not in system
    assert "no_default_search_domain" not in system.get("dns_resolver_options", {})


def test_no_resolvers_means_the_system_resolver() -> None:
    config = bootstrap_config("dragoman:18000", node_id="e1", node_cluster="")

    assert "typed_dns_resolver_config" not in config
    assert "typed_dns_resolver_config" not in xds_cluster(config)["cluster_type"]["typed_config"]


@pytest.mark.parametrize(
    ("value", "default_port", "expected"),
    [
        ("dragoman:18000", None, ("dragoman", 18000)),
        ("[::1]:18000", None, ("::1", 18000)),
        ("10.0.0.10", 53, ("10.0.0.10", 53)),
        ("::1", 53, ("::1", 53)),
        ("[fd00::1]", 53, ("fd00::1", 53)),
    ],
)
def test_split_host_port(value: str, default_port: int | None, expected: tuple[str, int]) -> None:
    assert split_host_port(value, default_port=default_port) == expected


@pytest.mark.parametrize("value", ["dragoman", "dragoman:", ":18000", "host:0", "host:70000"])
def test_split_host_port_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        split_host_port(value, default_port=None)


def test_dns_resolvers_must_be_ip_addresses() -> None:
    with pytest.raises(ValueError, match="IP address"):
        bootstrap_config("dragoman:1", node_id="e", node_cluster="", dns_resolvers=["dns.local"])


def test_yaml_keeps_strings_that_envoy_would_read_as_booleans() -> None:
    text = bootstrap_yaml("127.0.0.1:18000", node_id="n", node_cluster="y")

    assert "id: 'n'" in text
    assert "cluster: 'y'" in text
    assert yaml.safe_load(text)["node"] == {"id": "n", "cluster": "y"}


def test_example_bootstrap_is_what_dragoman_bootstrap_prints() -> None:
    text = EXAMPLE.read_text()
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))

    assert text.startswith("#")
    assert body == bootstrap_yaml(
        "127.0.0.1:18000", node_id="demo-envoy", node_cluster="default/demo"
    )


@pytest.mark.parametrize("transport", ["ads", "per-type"])
def test_the_cluster_for_dragoman_can_have_another_name(transport: str) -> None:
    config = bootstrap_config(
        "127.0.0.1:18000",
        node_id="e1",
        node_cluster="edge",
        xds_transport=transport,  # type: ignore[arg-type]
        xds_cluster_name="xds_cluster",
    )

    (cluster,) = config["static_resources"]["clusters"]
    assert cluster["name"] == "xds_cluster"
    assert cluster["load_assignment"]["cluster_name"] == "xds_cluster"
    text = yaml.safe_dump(config)
    assert XDS_CLUSTER not in text
    assert text.count("cluster_name: xds_cluster") >= 2  # the config sources name it too


@pytest.mark.parametrize("name", ["", "two words", "tab\there", "x" * 256, "ünïcode"])
def test_a_cluster_name_envoy_would_refuse_is_an_error(name: str) -> None:
    with pytest.raises(ValueError, match="xds_cluster_name"):
        bootstrap_yaml("127.0.0.1:18000", node_id="e", node_cluster="c", xds_cluster_name=name)


def test_downstream_connections_are_capped_by_the_overload_manager() -> None:
    monitors = bootstrap_config("127.0.0.1:18000", node_id="n", node_cluster="")[
        "overload_manager"
    ]["resource_monitors"]
    assert monitors == [
        {
            "name": "envoy.resource_monitors.global_downstream_max_connections",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors."
                "downstream_connections.v3.DownstreamConnectionsConfig",
                "max_active_downstream_connections": "50000",
            },
        }
    ]
    capped = bootstrap_config(
        "127.0.0.1:18000", node_id="n", node_cluster="", max_downstream_connections=7
    )
    limit = capped["overload_manager"]["resource_monitors"][0]["typed_config"]
    assert limit["max_active_downstream_connections"] == "7"
    with pytest.raises(ValueError, match="at least 1"):
        bootstrap_config("127.0.0.1:1", node_id="n", node_cluster="", max_downstream_connections=0)


@pytest.mark.parametrize("stats_address", [None, "127.0.0.1:8002"])
def test_stats_are_flushed_when_read_not_every_five_seconds(stats_address: str | None) -> None:
    # The periodic flush walks every stat even with no sink: ~95 ms every 5 s at 10,000
    # clusters. The admin interface (and the stats listener in front of it) flushes on read.
    config = bootstrap_config(
        "127.0.0.1:18000", node_id="e1", node_cluster="", stats_address=stats_address
    )

    assert config["stats_flush_on_admin"] is True
    assert "stats_flush_interval" not in config and "stats_sinks" not in config
