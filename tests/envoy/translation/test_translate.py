"""Translation, table-driven: DAG values in, Envoy resources out."""

from __future__ import annotations

import dataclasses

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import config_source_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.clusters.common.dns.v3 import dns_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import (
    ALL_GATEWAYS,
    Backend,
    Dag,
    DirectResponse,
    DnsCluster,
    EdsCluster,
    Forward,
    HttpListener,
    LbEndpoint,
    LoadAssignment,
    Locality,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    VirtualHost,
)
from dragoman.envoy import TranslateOptions, translate, translate_endpoints
from dragoman.envoy.resources.cluster_messages import cluster
from dragoman.envoy.resources.endpoint_messages import cluster_load_assignment
from dragoman.envoy.resources.listener_messages import listener
from dragoman.envoy.resources.route_messages import INVALID_BACKEND_CLUSTER, route
from dragoman.objects import ObjectKey
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET, Snapshot

WEB = ObjectKey("Service", "default", "web")
EXT = ObjectKey("Service", "default", "ext")
HTTP_ROUTE = ObjectKey("HTTPRoute", "shop", "storefront")

WEB_CLUSTER = EdsCluster("default/web/80", WEB, port=80, target_port=8080)
API_CLUSTER = EdsCluster("default/api/80", WEB, port=80, target_port="http")
EXT_CLUSTER = DnsCluster("ext/default/ext/443", EXT, hostname="api.example.com", port=443)


def forward_route(*backends: Backend, auto_host_rewrite: bool = False) -> Route:
    return Route(
        RouteMatch("PathPrefix", "/"),
        Forward(backends, auto_host_rewrite=auto_host_rewrite),
        HTTP_ROUTE,
        rule_index=2,
    )


def route_table(name: str, *routes: Route) -> RouteTable:
    return RouteTable(name, (VirtualHost(f"{name}/vh", ("shop.example.com",), routes),))


def gateway_group(name: str, port: int, clusters: tuple[str, ...]) -> NodeGroup:
    table = route_table(f"{name}/http", forward_route(*(Backend(c, 1) for c in clusters)))
    return NodeGroup(
        name=name,
        listeners=(HttpListener(f"{name}/http", port, table.name),),
        route_tables=(table,),
        clusters=clusters,
    )


def sample_dag(web_endpoints: tuple[str, ...] = ("10.0.0.1", "10.0.0.2")) -> Dag:
    """Two Gateways and the all-gateways group, sharing clusters."""
    demo = gateway_group("default/demo", 8080, (WEB_CLUSTER.name, EXT_CLUSTER.name))
    other = gateway_group("default/other", 8081, (API_CLUSTER.name, WEB_CLUSTER.name))
    everything = NodeGroup(
        ALL_GATEWAYS,
        demo.listeners + other.listeners,
        demo.route_tables + other.route_tables,
        tuple(sorted({*demo.clusters, *other.clusters})),
    )
    return Dag(
        groups={g.name: g for g in (everything, demo, other)},
        clusters={c.name: c for c in (WEB_CLUSTER, API_CLUSTER, EXT_CLUSTER)},
        load_assignments={
            WEB_CLUSTER.name: LoadAssignment(
                WEB_CLUSTER.name,
                (Locality("zone-a", tuple(LbEndpoint(a, 8080) for a in web_endpoints)),),
            ),
            API_CLUSTER.name: LoadAssignment(
                API_CLUSTER.name, (Locality("", (LbEndpoint("10.1.0.1", 9000),)),)
            ),
        },
    )


# --- clusters -------------------------------------------------------------------------------


def dns_settings(message: cluster_pb2.Cluster) -> dns_cluster_pb2.DnsCluster:
    settings = dns_cluster_pb2.DnsCluster()
    assert message.cluster_type.typed_config.Unpack(settings)
    return settings


@pytest.mark.parametrize(
    ("options", "refresh_s", "respect_ttl", "family"),
    [
        (TranslateOptions(), 30, True, dns_pb2.V4_PREFERRED),
        (
            TranslateOptions(dns_refresh_s=90, dns_respect_ttl=False, dns_lookup_family="ALL"),
            90,
            False,
            dns_pb2.ALL,
        ),
        (TranslateOptions(dns_lookup_family="V6_ONLY"), 30, True, dns_pb2.V6_ONLY),
    ],
)
def test_dns_cluster_is_strict_dns_through_the_dns_extension(
    options: TranslateOptions, refresh_s: int, respect_ttl: bool, family: int
) -> None:
    message = cluster(EXT_CLUSTER, options)

    assert message.name == EXT_CLUSTER.name
    assert message.WhichOneof("cluster_discovery_type") == "cluster_type"
    assert message.cluster_type.name == "envoy.cluster.dns"
    settings = dns_settings(message)
    assert settings.dns_refresh_rate.seconds == refresh_s
    assert settings.respect_dns_ttl is respect_ttl
    assert settings.dns_lookup_family == family
    assert settings.all_addresses_in_single_endpoint is False  # STRICT, not LOGICAL
    assert message.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    # 5 s, Envoy's own default: left out, one message less per cluster per SotW update.
    assert not message.HasField("connect_timeout")


@pytest.mark.parametrize("value", [EXT_CLUSTER, WEB_CLUSTER])
def test_connect_timeout_is_set_unless_it_is_envoys_default(value: object) -> None:
    assert isinstance(value, DnsCluster | EdsCluster)
    assert not cluster(value, TranslateOptions(connect_timeout_s=5)).HasField("connect_timeout")
    for timeout_s in (0.25, 4.999, 5.001, 30):
        message = cluster(value, TranslateOptions(connect_timeout_s=timeout_s))
        assert message.connect_timeout.ToNanoseconds() == round(timeout_s * 1e9)


def test_dns_cluster_names_its_host_in_an_inline_load_assignment() -> None:
    assignment = cluster(EXT_CLUSTER, TranslateOptions()).load_assignment

    assert assignment.cluster_name == EXT_CLUSTER.name
    (locality,) = assignment.endpoints
    (host,) = locality.lb_endpoints
    address = host.endpoint.address.socket_address
    # Absolute: no resolver search domain is ever appended to an external name.
    assert (address.address, address.port_value) == ("api.example.com.", 443)
    # auto_host_rewrite takes the Host from here.
    assert host.endpoint.hostname == "api.example.com"


def test_eds_cluster_fetches_its_endpoints_over_ads() -> None:
    message = cluster(WEB_CLUSTER, TranslateOptions(connect_timeout_s=0.25))

    assert message.name == WEB_CLUSTER.name
    assert message.type == cluster_pb2.Cluster.EDS
    source = message.eds_cluster_config.eds_config
    assert source.WhichOneof("config_source_specifier") == "ads"
    assert source.resource_api_version == config_source_pb2.V3
    assert message.eds_cluster_config.service_name == ""  # the CLA is named like the cluster
    assert message.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    assert message.connect_timeout.ToMilliseconds() == 250
    assert not message.HasField("load_assignment")


@pytest.mark.parametrize(
    "options",
    [
        {"dns_lookup_family": "IPV4"},
        {"dns_refresh_s": 0},
        {"connect_timeout_s": 0},
    ],
)
def test_options_reject_values_envoy_would_nack(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TranslateOptions(**options)  # type: ignore[arg-type]


# --- endpoints ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        (LoadAssignment("empty"), []),
        (
            LoadAssignment("one", (Locality("", (LbEndpoint("10.0.0.1", 80),)),)),
            [("", 1, [("10.0.0.1", 80)])],
        ),
        (
            LoadAssignment(
                "zones",
                (
                    Locality("a", (LbEndpoint("10.0.0.1", 80), LbEndpoint("10.0.0.2", 81)), 3),
                    Locality("b", (LbEndpoint("10.0.1.1", 80),), 1),
                ),
            ),
            [("a", 3, [("10.0.0.1", 80), ("10.0.0.2", 81)]), ("b", 1, [("10.0.1.1", 80)])],
        ),
    ],
)
def test_cluster_load_assignment_keeps_localities_weights_and_order(
    assignment: LoadAssignment, expected: list[tuple[str, int, list[tuple[str, int]]]]
) -> None:
    message = cluster_load_assignment(assignment)

    assert message.cluster_name == assignment.cluster
    got = []
    for locality in message.endpoints:
        # Weights are always present: gRPC clients drop localities without one.
        assert locality.HasField("load_balancing_weight")
        # The locality too, empty without a zone: gRPC rejects a CLA without one.
        assert locality.HasField("locality")
        zone = locality.locality.zone
        hosts = [
            (
                h.endpoint.address.socket_address.address,
                h.endpoint.address.socket_address.port_value,
            )
            for h in locality.lb_endpoints
        ]
        got.append((zone, locality.load_balancing_weight.value, hosts))
    assert got == expected


# --- listeners ------------------------------------------------------------------------------


def connection_manager(message: listener_pb2.Listener) -> hcm_pb2.HttpConnectionManager:
    (chain,) = message.filter_chains
    (network_filter,) = chain.filters
    assert network_filter.name == "envoy.filters.network.http_connection_manager"
    manager = hcm_pb2.HttpConnectionManager()
    assert network_filter.typed_config.Unpack(manager)
    return manager


def test_listener_serves_routes_from_rds_over_ads() -> None:
    message = listener(
        HttpListener("default/demo/http", 8080, "default/demo/http-routes"),
        TranslateOptions(listener_address="127.0.0.1"),
    )

    assert message.name == "default/demo/http"
    address = message.address.socket_address
    assert (address.address, address.port_value) == ("127.0.0.1", 8080)
    manager = connection_manager(message)
    assert manager.stat_prefix == "default/demo/http"
    assert manager.codec_type == hcm_pb2.HttpConnectionManager.AUTO
    assert manager.rds.route_config_name == "default/demo/http-routes"
    assert manager.rds.config_source.WhichOneof("config_source_specifier") == "ads"
    assert manager.rds.config_source.resource_api_version == config_source_pb2.V3
    cors, router = manager.http_filters
    assert cors.name == "envoy.filters.http.cors"
    assert router.name == "envoy.filters.http.router"
    assert router.typed_config.Is(router_pb2.Router.DESCRIPTOR)
    assert manager.strip_any_host_port is True
    assert manager.normalize_path.value is True
    assert manager.merge_slashes is True
    # WebSocket upgrades are allowed (enabled unset: Envoy's default, true).
    (upgrade,) = manager.upgrade_configs
    assert upgrade.upgrade_type == "websocket" and not upgrade.HasField("enabled")


# --- routes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path_type", "path", "field", "value"),
    [
        ("Exact", "/healthz", "path", "/healthz"),
        ("Exact", "/dir/", "path", "/dir/"),
        ("PathPrefix", "/", "prefix", "/"),
        ("PathPrefix", "/foo", "path_separated_prefix", "/foo"),
        ("PathPrefix", "/foo/", "path_separated_prefix", "/foo"),
        ("PathPrefix", "/foo/bar//", "path_separated_prefix", "/foo/bar"),
    ],
)
def test_path_match_forms(path_type: str, path: str, field: str, value: str) -> None:
    match = route(Route(RouteMatch(path_type, path), DirectResponse(200), HTTP_ROUTE)).match

    assert match.WhichOneof("path_specifier") == field
    assert getattr(match, field) == value


def test_unknown_path_match_type_is_an_error() -> None:
    with pytest.raises(ValueError, match="Prefix"):
        route(Route(RouteMatch("Prefix", "/"), DirectResponse(200), HTTP_ROUTE))


def weights_of(action: route_components_pb2.RouteAction) -> list[tuple[str, int]]:
    return [(c.name, c.weight.value) for c in action.weighted_clusters.clusters]


@pytest.mark.parametrize(
    ("backends", "cluster_name", "weights", "not_found_500"),
    [
        ((Backend("a", 1),), "a", [], False),
        ((Backend("a", 80), Backend("b", 20)), "", [("a", 80), ("b", 20)], False),
        # An invalid reference keeps its share of traffic, answered with 500.
        (
            (Backend("a", 3), Backend(None, 1)),
            "",
            [("a", 3), (INVALID_BACKEND_CLUSTER, 1)],
            True,
        ),
        (
            (Backend(None, 1), Backend("a", 2), Backend(None, 1)),
            "",
            [(INVALID_BACKEND_CLUSTER, 2), ("a", 2)],
            True,
        ),
        # Weight 0 gets no traffic at all.
        ((Backend("a", 1), Backend("b", 0)), "a", [], False),
        ((Backend("a", 1), Backend(None, 0)), "a", [], False),
        # The same cluster twice is one entry.
        ((Backend("a", 1), Backend("b", 1), Backend("a", 2)), "", [("a", 3), ("b", 1)], False),
    ],
)
def test_forward_chooses_cluster_or_weighted_clusters(
    backends: tuple[Backend, ...],
    cluster_name: str,
    weights: list[tuple[str, int]],
    not_found_500: bool,
) -> None:
    message = route(forward_route(*backends))

    assert message.WhichOneof("action") == "route"
    action = message.route
    assert action.cluster == cluster_name
    assert weights_of(action) == weights
    assert not action.weighted_clusters.HasField("total_weight")
    expected_code = (
        route_components_pb2.RouteAction.INTERNAL_SERVER_ERROR
        if not_found_500
        else route_components_pb2.RouteAction.SERVICE_UNAVAILABLE
    )
    assert action.cluster_not_found_response_code == expected_code


@pytest.mark.parametrize(
    "backends",
    [(), (Backend(None, 1),), (Backend(None, 1), Backend(None, 4)), (Backend("a", 0),)],
)
def test_forward_with_nothing_valid_answers_500(backends: tuple[Backend, ...]) -> None:
    message = route(forward_route(*backends))

    assert message.WhichOneof("action") == "direct_response"
    assert message.direct_response.status == 500


@pytest.mark.parametrize(("body", "has_body"), [("", False), ("gone fishing", True)])
def test_direct_response(body: str, has_body: bool) -> None:
    message = route(Route(RouteMatch("Exact", "/x"), DirectResponse(503, body), HTTP_ROUTE))

    assert message.direct_response.status == 503
    assert message.direct_response.HasField("body") is has_body
    assert message.direct_response.body.inline_string == body


@pytest.mark.parametrize("rewrite", [True, False])
def test_auto_host_rewrite(rewrite: bool) -> None:
    action = route(forward_route(Backend(EXT_CLUSTER.name, 1), auto_host_rewrite=rewrite)).route

    assert action.HasField("auto_host_rewrite") is rewrite
    assert action.auto_host_rewrite.value is rewrite


def test_route_names_say_which_rule_they_come_from() -> None:
    assert route(forward_route(Backend("a", 1))).name == "shop/storefront/rule/2"


def test_route_table_keeps_virtual_hosts_and_route_order() -> None:
    table = RouteTable(
        "t",
        (
            VirtualHost(
                "t/a",
                ("a.example.com", "*.a.example.com"),
                (
                    Route(RouteMatch("Exact", "/x"), DirectResponse(204), HTTP_ROUTE, 0),
                    Route(RouteMatch("PathPrefix", "/"), DirectResponse(404), HTTP_ROUTE, 1),
                ),
            ),
            VirtualHost("t/b", ("*",), ()),
        ),
    )
    (resource,) = translate_table(table)
    message = route_pb2.RouteConfiguration.FromString(resource)

    assert message.name == "t"
    assert [(v.name, list(v.domains)) for v in message.virtual_hosts] == [
        ("t/a", ["a.example.com", "*.a.example.com"]),
        ("t/b", ["*"]),
    ]
    assert [r.direct_response.status for r in message.virtual_hosts[0].routes] == [204, 404]
    # The invalid-backend cluster never exists: the table must load regardless.
    assert message.HasField("validate_clusters")
    assert message.validate_clusters.value is False


def translate_table(table: RouteTable) -> list[bytes]:
    group = NodeGroup("g", (), (table,), ())
    snapshot = translate(Dag(groups={"g": group}))["g"]
    return [r.body for r in snapshot.of_type(ROUTE).resources.values()]


# --- whole DAG ------------------------------------------------------------------------------


def names(snapshot: Snapshot, type_url: str) -> list[str]:
    return list(snapshot.of_type(type_url).resources)


def test_each_group_gets_its_own_resources_of_all_five_types() -> None:
    snapshots = translate(sample_dag())

    assert sorted(snapshots) == [ALL_GATEWAYS, "default/demo", "default/other"]
    demo = snapshots["default/demo"]
    assert set(demo.types) == {CLUSTER, ENDPOINT, SECRET, LISTENER, ROUTE}
    assert names(demo, CLUSTER) == [WEB_CLUSTER.name, EXT_CLUSTER.name]
    assert names(demo, ENDPOINT) == [WEB_CLUSTER.name]  # DNS clusters have no CLA
    assert names(demo, LISTENER) == ["default/demo/http"]
    assert names(demo, ROUTE) == ["default/demo/http"]
    everything = snapshots[ALL_GATEWAYS]
    assert names(everything, ENDPOINT) == [API_CLUSTER.name, WEB_CLUSTER.name]
    assert names(everything, LISTENER) == ["default/demo/http", "default/other/http"]


def test_eds_cluster_without_endpoints_still_gets_an_empty_cla() -> None:
    dag = dataclasses.replace(sample_dag(), load_assignments={})

    resource = translate(dag)["default/demo"].of_type(ENDPOINT).resources[WEB_CLUSTER.name]

    message = endpoint_pb2.ClusterLoadAssignment.FromString(resource.body)
    assert message.cluster_name == WEB_CLUSTER.name
    assert list(message.endpoints) == []


def test_group_naming_an_undefined_cluster_skips_it() -> None:
    group = NodeGroup("g", (), (), ("missing", WEB_CLUSTER.name))
    dag = Dag(groups={"g": group}, clusters={WEB_CLUSTER.name: WEB_CLUSTER})

    snapshot = translate(dag)["g"]

    assert names(snapshot, CLUSTER) == [WEB_CLUSTER.name]
    assert names(snapshot, ENDPOINT) == [WEB_CLUSTER.name]


def test_resources_are_serialized_once_and_shared_across_groups() -> None:
    snapshots = translate(sample_dag())
    everything, demo, other = (
        snapshots[n] for n in (ALL_GATEWAYS, "default/demo", "default/other")
    )

    for type_url, name in [
        (CLUSTER, WEB_CLUSTER.name),
        (CLUSTER, EXT_CLUSTER.name),
        (ENDPOINT, WEB_CLUSTER.name),
        (LISTENER, "default/demo/http"),
        (ROUTE, "default/demo/http"),
    ]:
        assert (
            everything.of_type(type_url).resources[name] is demo.of_type(type_url).resources[name]
        )
    assert (
        demo.of_type(CLUSTER).resources[WEB_CLUSTER.name]
        is other.of_type(CLUSTER).resources[WEB_CLUSTER.name]
    )


def test_equal_input_gives_byte_identical_output() -> None:
    first, second = translate(sample_dag()), translate(sample_dag())

    assert first.keys() == second.keys()
    for group in first:
        for type_url in (CLUSTER, ENDPOINT, LISTENER, ROUTE):
            a, b = first[group].of_type(type_url), second[group].of_type(type_url)
            assert a.version == b.version
            assert {n: r.body for n, r in a.resources.items()} == {
                n: r.body for n, r in b.resources.items()
            }


def test_different_options_change_the_versions() -> None:
    first = translate(sample_dag())["default/demo"]
    second = translate(sample_dag(), TranslateOptions(dns_refresh_s=60))["default/demo"]

    assert first.of_type(CLUSTER).version != second.of_type(CLUSTER).version
    assert first.of_type(LISTENER).version == second.of_type(LISTENER).version


# --- the EDS fast path ----------------------------------------------------------------------


def test_translate_endpoints_rebuilds_only_changed_clas() -> None:
    previous = translate(sample_dag())
    changed = sample_dag(web_endpoints=("10.0.0.1", "10.0.0.3"))

    current = translate_endpoints(changed, previous)

    assert current.keys() == previous.keys()
    for group in current:
        for type_url in (CLUSTER, LISTENER, ROUTE):
            assert current[group].of_type(type_url) is previous[group].of_type(type_url)
    everything_before = previous[ALL_GATEWAYS].of_type(ENDPOINT)
    everything_now = current[ALL_GATEWAYS].of_type(ENDPOINT)
    assert everything_now.version != everything_before.version
    assert (
        everything_now.resources[API_CLUSTER.name] is everything_before.resources[API_CLUSTER.name]
    )
    web = everything_now.resources[WEB_CLUSTER.name]
    assert web is not everything_before.resources[WEB_CLUSTER.name]
    assert web is current["default/demo"].of_type(ENDPOINT).resources[WEB_CLUSTER.name]
    # The fast path agrees with a full translation.
    full = translate(changed)
    for group in current:
        assert current[group].of_type(ENDPOINT).version == full[group].of_type(ENDPOINT).version


def test_translate_endpoints_keeps_unchanged_groups_as_they_were() -> None:
    previous = translate(sample_dag())
    # Only the API cluster's endpoints change: default/demo does not serve it.
    changed = sample_dag()
    changed = dataclasses.replace(
        changed,
        load_assignments={
            **changed.load_assignments,
            API_CLUSTER.name: LoadAssignment(API_CLUSTER.name),
        },
    )

    current = translate_endpoints(changed, previous)

    assert current["default/demo"].of_type(ENDPOINT) is previous["default/demo"].of_type(ENDPOINT)
    assert current["default/other"].of_type(ENDPOINT) is not previous["default/other"].of_type(
        ENDPOINT
    )


def test_translate_endpoints_translates_a_group_it_has_not_seen_in_full() -> None:
    dag = sample_dag()
    previous = {k: v for k, v in translate(dag).items() if k != "default/other"}

    current = translate_endpoints(dag, previous)

    assert names(current["default/other"], LISTENER) == ["default/other/http"]
    assert current["default/other"].of_type(CLUSTER).version == (
        translate(dag)["default/other"].of_type(CLUSTER).version
    )
