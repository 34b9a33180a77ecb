"""deploy/'s EnvoyProxyParameters CRD and dragoman's parser agree: the same fields, bounds and
choices, and what one refuses the other refuses (so an object the API server stored is one
dragoman reads, and the reverse)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dragoman.provisioning.parameters import (
    API_VERSION,
    GROUP,
    KIND,
    MAX_CONCURRENCY,
    MAX_REPLICAS,
    RESOURCE_NAMES,
    SERVICE_TYPES,
    TRAFFIC_POLICIES,
    parse_parameters,
)

CRD = Path(__file__).resolve().parents[2] / "deploy" / "crd-envoyproxyparameters.yaml"


def crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD.read_text())
    return loaded


def schema() -> dict[str, Any]:
    [version] = crd()["spec"]["versions"]
    assert (version["served"], version["storage"]) == (True, True)
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def test_the_crd_names_the_kind_the_parser_reads() -> None:
    spec = crd()["spec"]
    [version] = spec["versions"]
    assert f"{spec['group']}/{version['name']}" == API_VERSION
    assert (spec["group"], spec["names"]["kind"]) == (GROUP, KIND)
    assert spec["scope"] == "Namespaced"  # parametersRefs name a namespace
    assert crd()["metadata"]["name"] == f"{spec['names']['plural']}.{GROUP}"


def test_the_schema_has_the_parsers_fields_bounds_and_choices() -> None:
    spec = schema()["properties"]["spec"]["properties"]
    assert set(spec) == {"replicas", "image", "concurrency", "resources", "service"}
    assert (spec["replicas"]["minimum"], spec["replicas"]["maximum"]) == (0, MAX_REPLICAS)
    assert (spec["concurrency"]["minimum"], spec["concurrency"]["maximum"]) == (
        1,
        MAX_CONCURRENCY,
    )
    service = spec["service"]["properties"]
    assert tuple(service["type"]["enum"]) == SERVICE_TYPES
    assert tuple(service["externalTrafficPolicy"]["enum"]) == TRAFFIC_POLICIES
    for part in ("requests", "limits"):
        assert tuple(spec["resources"]["properties"][part]["properties"]) == RESOURCE_NAMES
    [rule] = spec["service"]["x-kubernetes-validations"]
    assert "ClusterIP" in rule["rule"] and "externalTrafficPolicy" in rule["rule"]


GOOD = [
    {},
    {"replicas": 0},
    {"replicas": 1000, "concurrency": 1024},
    {"image": "registry.example.com:5000/team/envoy:v1.40.0"},
    {"image": "envoy@sha256:" + "0" * 64},
    {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
    {"resources": {"limits": {"cpu": "1.5", "memory": "2e9", "ephemeral-storage": "1G"}}},
    {"service": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster"}},
    {"service": {"type": "ClusterIP"}},
]
BAD = [
    {"replicas": -1},
    {"replicas": 1001},
    {"replicas": 1.5},
    {"concurrency": 0},
    {"image": ""},
    {"image": "envoy latest"},
    {"image": "envoy:"},
    {"resources": {"requests": {"cpu": "lots"}}},
    {"resources": {"requests": {"cpu": "-1"}}},
    {"resources": {"limits": {"memory": "1 Gi"}}},
    {"service": {"type": "ExternalName"}},
    {"service": {"externalTrafficPolicy": "local"}},
]


def schema_accepts(spec: dict[str, Any]) -> bool:
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": spec,
    }
    return jsonschema.Draft4Validator(schema()).is_valid(document)


def parser_accepts(spec: dict[str, Any]) -> bool:
    document = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "p"}, "spec": spec}
    return not parse_parameters(document, "prod").problems


@pytest.mark.parametrize("spec", GOOD)
def test_what_the_schema_accepts_the_parser_accepts(spec: dict[str, Any]) -> None:
    assert schema_accepts(spec)
    assert parser_accepts(spec)


@pytest.mark.parametrize("spec", BAD)
def test_what_the_schema_refuses_the_parser_refuses(spec: dict[str, Any]) -> None:
    assert not schema_accepts(spec)
    assert not parser_accepts(spec)


def test_the_rule_the_schema_checks_by_cel_the_parser_checks_too() -> None:
    assert not parser_accepts({"service": {"type": "ClusterIP", "externalTrafficPolicy": "Local"}})


def test_the_readmes_example_is_valid_for_both() -> None:
    readme = (CRD.parents[1] / "README.md").read_text()
    [example] = [
        block.split("```", 1)[0]
        for block in readme.split("```yaml\n")[1:]
        if f"kind: {KIND}\n" in block.split("```", 1)[0]
    ]
    document = yaml.safe_load(example)
    assert jsonschema.Draft4Validator(schema()).is_valid(document)
    parsed = parse_parameters(document, "default")
    assert parsed.problems == ()
    assert parsed.settings.replicas == 3
