"""What thousands of parsed objects share instead of holding copies: strings read from
manifests are interned, empty maps are the one EMPTY_MAPPING, the defaults of route rules are
single objects, and a manifest directory's records name each file with one string. Each
saving rests on one of these; each test fails if its invariant breaks."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from dragoman.objects import HTTPRoute, Service
from dragoman.objects.meta import EMPTY_MAPPING
from dragoman.snapshots import interning
from dragoman.sources import shared
from dragoman.sources.decode import decode_documents
from dragoman.sources.manifests import ManifestDirectory, parse_fresh_files
from dragoman.sources.parse import parse_object
from dragoman.sources.parsers.http_route import DEFAULT_MATCHES, NO_TIMEOUTS
from dragoman.sources.shared import CANONICAL_LIMIT, canonical, interned, shared_int

needs_freed_interned_strings = pytest.mark.skipif(
    not shared.INTERNED_STRINGS_ARE_FREED,
    reason="this interpreter keeps interned strings for good, so nothing is interned",
)


def _file(i: int, *, labels: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc{i}\n  namespace: shop\n{labels}"
        f"spec:\n  type: ExternalName\n  externalName: svc{i}.example.test\n"
        "  ports: [{name: http, port: 80}]\n"
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
        f"metadata: {{name: svc{i}, namespace: shop}}\n"
        "spec:\n  parentRefs: [{name: gateway, sectionName: http}]\n"
        f"  rules: [{{backendRefs: [{{name: svc{i}, port: 80}}]}}]\n"
    )


def _parse(text: str) -> tuple[Service, HTTPRoute]:
    service, route = (parse_object(d) for d in decode_documents(text.encode(), is_json=False))
    assert isinstance(service, Service) and isinstance(route, HTTPRoute)
    return service, route


@needs_freed_interned_strings
def test_strings_repeated_across_objects_are_one_object() -> None:
    labels = "  labels: {app.kubernetes.io/part-of: shop}\n"
    (service1, route1), (service2, route2) = _parse(_file(1, labels=labels)), _parse(_file(2))
    # Namespaces, port names, types, the Gateway's name and section: once in memory.
    assert service1.meta.namespace is service2.meta.namespace is route2.meta.namespace
    assert service1.ports[0].name is service2.ports[0].name
    assert service1.type is service2.type
    [parent1], [parent2] = route1.parent_refs, route2.parent_refs
    assert parent1.name is parent2.name and parent1.section_name is parent2.section_name
    # A Service's name, its route's and the route's reference to it: one string.
    backend = route1.rules[0].backend_refs[0]
    assert service1.meta.name is route1.meta.name is backend.name
    # Interned: equal strings read later (another file, another load) are the same object.
    assert service1.meta.namespace is sys.intern("shop")
    [label] = service1.meta.labels
    assert label is sys.intern("app.kubernetes.io/part-of")


def test_values_of_one_object_alone_are_not_interned() -> None:
    """A route's hostnames and a Service's external name are its own: interning them would
    grow the interpreter's table of interned strings for nothing."""
    text = _file(1).replace("parentRefs:", "hostnames: [svc1.shop.test]\n  parentRefs:")
    (service1, route1), (service2, route2) = _parse(text), _parse(text)
    assert service1.external_name == service2.external_name == "svc1.example.test"
    assert service1.external_name is not service2.external_name
    assert route1.hostnames == route2.hostnames == ("svc1.shop.test",)
    assert route1.hostnames[0] is not route2.hostnames[0]


def test_equal_parent_lists_ports_and_numbers_are_one_object() -> None:
    (service1, route1), (service2, route2) = _parse(_file(1)), _parse(_file(2))
    assert route1.parent_refs is route2.parent_refs
    assert service1.ports is service2.ports
    backend1, backend2 = route1.rules[0].backend_refs[0], route2.rules[0].backend_refs[0]
    big_port = _file(3).replace("port: 80", "port: 18080")
    (service3, route3), (service4, _) = _parse(big_port), _parse(big_port)
    # Beyond the ints Python itself shares (up to 256): one object per port number.
    assert service3.ports[0].port is route3.rules[0].backend_refs[0].port is service4.ports[0].port
    assert backend1.port is backend2.port


def test_shared_tables_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "_canonical", {})  # filled here, not for the other tests
    big, same = int("1" * 13), int("1" * 13)
    assert shared_int(big) is big and shared_int(same) is same  # beyond the range: as given
    assert shared_int(-1) == -1
    values = [(f"value-{i}",) for i in range(CANONICAL_LIMIT + 10)]
    for value in values:
        canonical(value)
    assert len(shared._canonical) <= CANONICAL_LIMIT
    # Past the limit the table started over: what comes later is shared again.
    late = (f"value-{CANONICAL_LIMIT + 50}",)
    assert canonical(late) is late and canonical((late[0],)) is late
    assert len(shared._canonical) <= CANONICAL_LIMIT


def test_nothing_is_interned_where_interned_strings_stay_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On CPython 3.12.0-3.12.5 and free-threaded builds an interned string is never freed:
    names that come and go would grow memory without bound."""
    name = "".join(["svc-", "gone"])
    monkeypatch.setattr(interning, "INTERNED_STRINGS_ARE_FREED", False)
    assert interned(name) is name
    monkeypatch.setattr(interning, "INTERNED_STRINGS_ARE_FREED", True)
    assert interned(name) is sys.intern("svc-gone")


def test_long_strings_are_kept_as_read() -> None:
    long_name = "x" * 300 + ".example.test"  # no name: an external name may be this long
    service, _ = _parse(_file(1).replace("svc1.example.test", long_name))
    assert service.external_name == long_name


def test_objects_without_maps_share_the_empty_mapping() -> None:
    (service1, route1), (service2, _) = _parse(_file(1)), _parse(_file(2))
    for meta in (service1.meta, service2.meta, route1.meta):
        assert meta.labels is EMPTY_MAPPING and meta.annotations is EMPTY_MAPPING
    # An empty map written out is the shared one too; a Service without a selector has None.
    with_empty = _file(3, labels="  labels: {}\n  annotations: {}\n")
    service3, _ = _parse(with_empty)
    assert service3.meta.labels is EMPTY_MAPPING and service3.meta.annotations is EMPTY_MAPPING
    assert service1.selector is None


def test_route_rules_share_their_defaults() -> None:
    (_, route1), (_, route2) = _parse(_file(1)), _parse(_file(2))
    [rule1], [rule2] = route1.rules, route2.rules
    assert rule1.matches is rule2.matches is DEFAULT_MATCHES
    assert rule1.timeouts is rule2.timeouts is NO_TIMEOUTS


def test_a_directory_names_each_file_with_one_string(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"svc{i}.yaml").write_text(_file(i))
    directory = ManifestDirectory(tmp_path)
    result = directory.load()
    assert len(result.objects) == 6 and result.errors == ()
    wheres = set()
    for path, record in directory._parsed.items():
        assert record.stamp is not None and record.stamp.path is path
        assert record.pieces is EMPTY_MAPPING  # a small file keeps no pieces
        assert record.wheres == ("#1", "#2")
        wheres.add(id(record.wheres))
        for obj in record.objects:
            assert obj.key is obj.key
    assert len(wheres) == 1  # one tuple ("#1", "#2") for every file
    assert result.origins[result.objects[1].key] == "svc0.yaml#2"
    assert directory.stamps()["svc1.yaml"] is directory._parsed["svc1.yaml"].stamp


@needs_freed_interned_strings
def test_what_a_worker_process_parsed_shares_the_empty_mapping(tmp_path: Path) -> None:
    """A worker's share arrives pickled: the empty mapping is still the one instance, and
    strings the worker shared arrive shared."""
    for i in range(2):
        (tmp_path / f"svc{i}.yaml").write_text(_file(i))
    parsed = parse_fresh_files(str(tmp_path), "default", ["svc0.yaml", "svc1.yaml"])
    received = pickle.loads(pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL))
    assert received == parsed
    first, second = (record.objects[0] for record in received if record is not None)
    assert first.meta.labels is EMPTY_MAPPING and second.meta.annotations is EMPTY_MAPPING
    assert first.meta.namespace is second.meta.namespace
