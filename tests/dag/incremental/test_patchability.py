"""When a change may be patched in place: the store fields and stores an entry-by-entry
update handles, and new DNS check observations that change only addresses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dragoman.dag.context import build_context
from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.frontends.listeners import frontends
from dragoman.dag.incremental.patchability import (
    PATCHABLE_FIELDS,
    needs_names,
    patchable,
    policy_targets,
    reads_config_maps,
    serves_alike,
)
from dragoman.dag.options import BuildOptions
from dragoman.store import Store
from tests.support.builders import backend_tls_policy, gateway, gateway_class, listener, typed

NAME = "api.example.net"


def _store(*extra: Mapping[str, Any]) -> Store:
    return Store.from_objects(
        typed(gateway_class(), gateway(listeners=[listener("http", 8080)]), *extra)
    )


def test_routes_and_what_they_read_are_patched_gateways_are_not() -> None:
    assert {"http_routes", "services", "endpoint_slices", "secrets"} <= PATCHABLE_FIELDS
    assert not {"gateways", "gateway_classes", "listener_sets", "namespaces"} & PATCHABLE_FIELDS


def test_a_store_of_plain_listeners_is_patchable() -> None:
    store = _store()
    options = BuildOptions()
    assert patchable(store, frontends(build_context(store, options, {})))


def test_backend_tls_policies_are_read_with_config_maps_and_need_names() -> None:
    plain = _store()
    with_policy = _store(
        backend_tls_policy("p", "api", "api.test", namespace="apps", well_known="System")
    )
    assert not reads_config_maps(plain) and reads_config_maps(with_policy)
    assert not needs_names(plain, BuildOptions()) and needs_names(with_policy, BuildOptions())
    assert needs_names(plain, BuildOptions(dns_check=True))
    assert policy_targets(plain, with_policy) == {("apps", "api")}


def test_names_served_before_and_after_change_only_addresses() -> None:
    options = BuildOptions(dns_check=True)
    before = {NAME: DnsObservation(("192.0.2.1",))}
    moved = {NAME: DnsObservation(("192.0.2.2",))}
    failed = {NAME: DnsObservation((), error="SERVFAIL")}
    assert serves_alike(options, before, moved, [NAME])
    assert not serves_alike(options, before, failed, [NAME])
    assert not serves_alike(options, {}, moved, [NAME])  # not served before: pending
    assert not serves_alike(BuildOptions(), before, moved, [NAME])  # no DNS check at all
