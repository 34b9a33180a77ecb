"""The table of kinds is the one list: the parser, the Store, the Kubernetes watches and the
status command each follow its rows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dragoman.cli import main
from dragoman.kubernetes.status_fallback import ROUTE_KINDS
from dragoman.kubernetes.watched_kinds import WATCHED_KINDS
from dragoman.objects.kinds import KINDS, Kind
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import describe_object, parse_object
from dragoman.store import OBJECT_FIELDS, Store

# The least each kind's parser accepts: what its schema requires beyond metadata.
MINIMAL_SPEC: dict[str, dict[str, object]] = {
    "Service": {"spec": {"ports": [{"port": 80}]}},
    "HTTPRoute": {"spec": {}},
    "GRPCRoute": {"spec": {}},
    "EndpointSlice": {"addressType": "IPv4", "endpoints": []},
    "Secret": {"type": "Opaque"},
    "GatewayClass": {"spec": {"controllerName": "example.com/controller"}},
    "Gateway": {
        "spec": {
            "gatewayClassName": "c",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        }
    },
    "ReferenceGrant": {
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "a"}],
            "to": [{"group": "", "kind": "Service"}],
        }
    },
    "BackendTLSPolicy": {
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
            "validation": {"hostname": "s.example", "wellKnownCACertificates": "System"},
        }
    },
    "TCPRoute": {"spec": {"rules": [{"backendRefs": [{"name": "s", "port": 5432}]}]}},
    "TLSRoute": {
        "spec": {
            "hostnames": ["s.example"],
            "rules": [{"backendRefs": [{"name": "s", "port": 443}]}],
        }
    },
    "UDPRoute": {"spec": {"rules": [{"backendRefs": [{"name": "s", "port": 53}]}]}},
    "ListenerSet": {
        "spec": {
            "parentRef": {"name": "one"},
            "listeners": [{"name": "extra", "port": 8080, "protocol": "HTTP"}],
        }
    },
    "XBackend": {
        "spec": {
            "type": "ExternalHostname",
            "externalHostname": {"hostname": "api.example.com"},
            "port": {"port": 443},
        }
    },
    "CredentialInjector": {"spec": {"secretRef": {"name": "api-key", "key": "token"}}},
}


def minimal(kind: Kind, version: str) -> dict[str, object]:
    return {
        "apiVersion": kind.api_version(version),
        "kind": kind.kind,
        "metadata": {"name": "one", "namespace": "ns"},
        **MINIMAL_SPEC.get(kind.kind, {}),
    }


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_every_row_is_parsed_in_each_of_its_versions_into_its_type_and_store_field(
    kind: Kind,
) -> None:
    for version in kind.versions:
        parsed = parse_object(minimal(kind, version))
        assert type(parsed) is kind.type
        assert parsed.meta.namespace == ("ns" if kind.namespaced else "")
        store = Store.from_objects([parsed])
        assert getattr(store, kind.store_field) == {(parsed.meta.namespace, "one"): parsed}
        others = [name for name in OBJECT_FIELDS if name != kind.store_field]
        assert all(getattr(store, name) == {} for name in others)
    name = "one" if not kind.namespaced else "ns/one"
    assert describe_object(minimal(kind, kind.versions[0])) == f"{kind.kind}/{name}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_a_version_outside_the_row_is_refused_naming_the_row_versions(kind: Kind) -> None:
    doc = minimal(kind, "v9")
    with pytest.raises(ObjectError) as raised:
        parse_object(doc)
    [(field, message)] = raised.value.problems
    assert field == "apiVersion"
    assert all(kind.api_version(version) in message for version in kind.versions)


def test_the_store_has_one_field_per_row_and_no_other() -> None:
    """Every field a store is made with holds one row's objects (the other, its provenance,
    is set by with_object alone)."""
    made_with = [f.name for f in dataclasses.fields(Store) if f.init]
    assert sorted(made_with) == sorted(OBJECT_FIELDS) == sorted(k.store_field for k in KINDS)


def test_kubernetes_watches_every_row_in_table_order() -> None:
    assert [
        (w.kind, w.group, w.versions, w.plural, w.namespaced, w.has_status) for w in WATCHED_KINDS
    ] == [(k.kind, k.group, k.versions, k.plural, k.namespaced, k.has_status) for k in KINDS]
    assert sorted(ROUTE_KINDS) == ["GRPCRoute", "HTTPRoute", "TCPRoute", "TLSRoute", "UDPRoute"]


def test_status_command_reads_generation_of_every_kind_with_a_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dragoman status` finds each object's generation through its row's Store field."""
    docs = []
    for kind in KINDS:
        doc = minimal(kind, kind.versions[0])
        doc["metadata"] = {"name": "one", "namespace": "default", "generation": 7}
        docs.append(json.dumps(doc))
    # Every Gateway API object with a status below is dragoman's: the class names it.
    docs[[k.kind for k in KINDS].index("GatewayClass")] = json.dumps(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "c", "generation": 7},
            "spec": {"controllerName": "dragoman.dev/gateway-controller"},
        }
    )
    (tmp_path / "all.yaml").write_text("\n---\n".join(docs))
    assert main(["status", "--manifests", str(tmp_path), "--output", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert sorted(item["kind"] for item in items) == sorted(k.kind for k in KINDS if k.has_status)
    assert all(item["metadata"]["generation"] == 7 for item in items)
