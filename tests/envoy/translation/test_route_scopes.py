"""Gateways asking for a route table per hostname (dragoman.dev/route-tables: per-host): their
plain-HTTP connection managers take scopes keyed on the Host, one ScopedRouteConfiguration
per hostname holding that host's route table inline, as the shared table would hold it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.frontends.route_tables import PER_HOST, ROUTE_TABLES
from dragoman.dag.model import ALL_GATEWAYS, Dag, HttpListener
from dragoman.envoy import translate
from dragoman.envoy.resources.listener_messages import listener as listener_message
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.snapshot_yaml import render_yaml
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.envoy.translation.route_scopes import route_scope
from dragoman.envoy.translation.translator import Translation
from dragoman.snapshots.resources import LISTENER, ROUTE, SCOPED_ROUTE, Snapshot
from tests.support.builders import backend_ref, gateway, http_route, listener, rule, service
from tests.support.envoy_checks import problems_in, translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages, with_inline_routes
from tests.support.feature_manifests import every_feature_dag
from tests.support.status_builds import DRAGOMAN_CLASS, build_text

HOSTS = ("a.example.com", "b.example.com")


def annotated(value: str | None = PER_HOST, **options: Any) -> dict[str, Any]:
    found = gateway(listeners=[listener()], **options)
    if value is not None:
        found["metadata"]["annotations"] = {ROUTE_TABLES: value}
    return found


def world(value: str | None = PER_HOST, hosts: tuple[str, ...] = HOSTS) -> Dag:
    routes = [
        http_route(
            f"r{index}",
            rules=[
                rule(
                    backend_ref("web", 80),
                    filters=[
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"add": [{"name": "x-h", "value": host}]},
                        }
                    ],
                )
            ],
            hostnames=[host],
        )
        for index, host in enumerate(hosts)
    ]
    return build_text(DRAGOMAN_CLASS, annotated(value), service("web"), *routes)


def manager(snapshot: Snapshot) -> hcm_pb2.HttpConnectionManager:
    [listener_message] = messages(snapshot, LISTENER)
    found = hcm_pb2.HttpConnectionManager()
    assert listener_message.filter_chains[0].filters[0].typed_config.Unpack(found)
    return found


def test_the_connection_manager_takes_scopes_keyed_on_the_host_without_its_port() -> None:
    snapshot = translate(world())[ALL_GATEWAYS]
    scoped = manager(snapshot).scoped_routes
    assert manager(snapshot).WhichOneof("route_specifier") == "scoped_routes"
    assert scoped.name == "http-80"
    [fragment] = scoped.scope_key_builder.fragments
    extractor = fragment.header_value_extractor
    assert (extractor.name, extractor.element_separator, extractor.index) == (":authority", ":", 0)
    # The same config source as RDS takes today: over ADS.
    assert scoped.scoped_rds.scoped_rds_config_source.HasField("ads")
    assert scoped.rds_config_source.HasField("ads")
    # Nothing left over RDS: the listener names no RouteConfiguration.
    assert not snapshot.of_type(ROUTE).resources
    assert snapshot.of_type(LISTENER).resources["http-80"].references == ()


def test_each_hostname_has_a_scope_holding_what_the_shared_table_holds_for_it() -> None:
    shared = messages(translate(world(None))[ALL_GATEWAYS], ROUTE)
    [table] = [t for t in shared if t.name == "http-80"]
    by_host = {host.name: host for host in table.virtual_hosts}
    scopes = messages(translate(world())[ALL_GATEWAYS], SCOPED_ROUTE)
    assert [s.name for s in scopes] == [f"http-80/{host}" for host in HOSTS]
    for scope in scopes:
        host = scope.name.removeprefix("http-80/")
        assert [f.string_key for f in scope.key.fragments] == [host]
        inline = scope.route_configuration
        assert inline.name == scope.name
        assert list(inline.virtual_hosts) == [by_host[host]]
        # The table-level fields the shared table carries, on each scope's table.
        expected = route_pb2.RouteConfiguration()
        expected.CopyFrom(table)
        expected.name = scope.name
        del expected.virtual_hosts[:]
        expected.virtual_hosts.add().CopyFrom(by_host[host])
        assert inline == expected


def test_without_the_annotation_nothing_changes() -> None:
    snapshots = translate(world(None))
    for snapshot in snapshots.values():
        assert SCOPED_ROUTE not in snapshot.types
        assert manager(snapshot).WhichOneof("route_specifier") == "rds"
    assert "scoped_routes" not in render_yaml(snapshots)
    # `shared` says what the default does.
    assert translate(world("shared")) == snapshots


def test_the_yaml_text_shows_the_scopes() -> None:
    text = render_yaml(translate(world()))
    assert "scoped_routes:\n- name: http-80/a.example.com" in text
    assert "string_key: b.example.com" in text


def test_an_unchanged_host_keeps_its_scope_bytes_across_translations() -> None:
    translation = Translation()
    before = translation.translate(world())[ALL_GATEWAYS].of_type(SCOPED_ROUTE).resources
    after = translation.translate(world(hosts=(*HOSTS, "c.example.com")))[ALL_GATEWAYS]
    scopes = after.of_type(SCOPED_ROUTE).resources
    assert sorted(scopes) == [f"http-80/{h}" for h in (*HOSTS, "c.example.com")]
    for host in HOSTS:
        assert scopes[f"http-80/{host}"] is before[f"http-80/{host}"]


def test_nothing_deprecated_or_work_in_progress_is_set() -> None:
    snapshot = translate(world())[ALL_GATEWAYS]
    found = [p for m in messages(snapshot, SCOPED_ROUTE) for p in problems_in(m, "scope")]
    found += [p for m in messages(snapshot, LISTENER) for p in problems_in(m, "listener")]
    assert found == []


def test_envoy_accepts_the_scoped_listener_and_its_scopes(tmp_path: Path) -> None:
    envoy = envoy_binary()
    snapshot = translate(world())[ALL_GATEWAYS]
    # The listener as served (scoped RDS over ADS), and a copy with its scopes inline.
    config = translated_bootstrap(snapshot, tmp_path / "admin.sock")
    assert len(config["static_resources"]["listeners"]) == 2
    path = tmp_path / "scoped.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy, path)


def test_the_dag_marks_the_listener_scoped() -> None:
    [value] = world().groups[ALL_GATEWAYS].listeners
    assert isinstance(value, HttpListener) and value.scoped
    [value] = world(None).groups[ALL_GATEWAYS].listeners
    assert isinstance(value, HttpListener) and not value.scoped


@pytest.mark.parametrize("group", [ALL_GATEWAYS, "default/gw"])
def test_every_group_of_the_gateway_is_scoped(group: str) -> None:
    assert SCOPED_ROUTE in translate(world())[group].types


def test_envoy_accepts_every_features_virtual_hosts_as_scopes(tmp_path: Path) -> None:
    """Every feature's virtual hosts (tests/support/feature_manifests.py), each made a scope of
    a scoped listener: Envoy validates them as it validates the shared tables."""
    dag = every_feature_dag()
    snapshot = translate(dag)[ALL_GATEWAYS]
    config = translated_bootstrap(snapshot, tmp_path / "admin.sock")
    [value] = [v for v in dag.groups[ALL_GATEWAYS].listeners if isinstance(v, HttpListener)][:1]
    scoped = dataclasses.replace(value, scoped=True)
    message = listener_message(scoped, TranslateOptions())
    scopes = [
        route_scope(table.name, host)
        for table in dag.groups[ALL_GATEWAYS].route_tables
        for host in table.virtual_hosts
    ]
    assert len(scopes) > 10
    assert [p for s in scopes for p in problems_in(s, "scope")] == []
    copy = with_inline_routes(message, {}, scopes)
    copy.name = "every-feature-scoped"
    copy.address.socket_address.port_value = 29999
    config["static_resources"]["listeners"].append(to_json_mapping(copy))
    path = tmp_path / "every-feature-scoped.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy_binary(), path)
