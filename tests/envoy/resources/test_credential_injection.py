"""Credential injection as Envoy receives it: the value in an SDS generic secret alone, a
credential_injector filter per credential disabled in the connection manager and enabled
by the routes that inject it; what Envoy's own validation accepts, and what `render`
shows (the value redacted)."""

from __future__ import annotations

from pathlib import Path

from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.filters.http.credential_injector.v3 import credential_injector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.injected_credentials.generic.v3 import generic_pb2

from dragoman.dag.model import Dag
from dragoman.envoy import translate
from dragoman.envoy.text.snapshot_yaml import REDACTED, render_yaml
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.snapshots.resources import LISTENER, ROUTE, SECRET, Snapshot
from tests.support.credentials import VALUE, WORLD, credential_injector, injector_route
from tests.support.envoy_checks import translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import build_text

FILTER = "envoy.filters.http.credential_injector/default/api-key"


def injecting_dag() -> Dag:
    return build_text(
        *WORLD,
        credential_injector("api-key", "api-key", "token", header="X-Api-Key"),
        injector_route("api-key"),
    )


def snapshot() -> Snapshot:
    return translate(injecting_dag())["default/gw"]


def test_the_value_travels_in_a_generic_secret_and_nowhere_else() -> None:
    served = snapshot()
    [secret] = messages(served, SECRET)
    assert secret.name == "credential/default/api-key"
    assert secret.generic_secret.secret.inline_bytes == VALUE
    for type_url in (LISTENER, ROUTE):
        for resource in served.of_type(type_url).resources.values():
            assert VALUE not in resource.body and b"s3cr3t" not in resource.body


def test_the_filter_is_disabled_in_the_manager_and_enabled_by_the_injecting_route() -> None:
    served = snapshot()
    [listener] = messages(served, LISTENER)
    manager = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    names = [f.name for f in manager.http_filters]
    assert names == ["envoy.filters.http.cors", FILTER, "envoy.filters.http.router"]
    injector_filter = manager.http_filters[1]
    assert injector_filter.disabled
    injector = credential_injector_pb2.CredentialInjector()
    injector_filter.typed_config.Unpack(injector)
    assert not injector.overwrite and not injector.allow_request_without_credential
    generic = generic_pb2.Generic()
    injector.credential.typed_config.Unpack(generic)
    assert generic.header == "X-Api-Key"
    assert generic.credential.name == "credential/default/api-key"
    assert generic.credential.sds_config.HasField("ads")

    [table] = messages(served, ROUTE)
    routes = {r.name: r for r in table.virtual_hosts[0].routes}
    enabling = [name for name, r in routes.items() if FILTER in r.typed_per_filter_config]
    assert enabling == ["default/r/rule/0"]  # /api; not rule 1 (/plain)
    config = rc_pb2.FilterConfig()
    routes["default/r/rule/0"].typed_per_filter_config[FILTER].Unpack(config)
    assert not config.disabled and config.HasField("config")


def test_render_redacts_the_value() -> None:
    text = render_yaml(translate(injecting_dag()))
    assert "s3cr3t" not in text and VALUE.decode() not in text
    assert f"generic_secret: '{REDACTED}'" in text
    assert FILTER in text


def test_a_listener_without_injecting_routes_has_no_injector_filter() -> None:
    dag = build_text(*WORLD, injector_route("missing"))
    [listener] = messages(translate(dag)["default/gw"], LISTENER)
    manager = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    assert [f.name for f in manager.http_filters] == [
        "envoy.filters.http.cors",
        "envoy.filters.http.router",
    ]
    assert messages(translate(dag)["default/gw"], SECRET) == []


def test_envoy_accepts_the_translation(tmp_path: Path) -> None:
    config = translated_bootstrap(snapshot(), tmp_path / "admin.sock")
    path = tmp_path / "credentials.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy_binary(), path)
