"""`dragoman status`: every object as dragoman would write it back, and how conditions get
their lastTransitionTime."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from dragoman.cli import main
from dragoman.dag.status.stamp import stamp
from tests.support.status_builds import DRAGOMAN_CLASS, GW

EXAMPLES = Path(__file__).parents[2] / "examples"
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

MANIFESTS = (
    DRAGOMAN_CLASS
    + f"""
---
apiVersion: {GW}
kind: Gateway
metadata: {{name: edge, namespace: default, generation: 3}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: http, port: 8080, protocol: HTTP}}
  - {{name: ssh, port: 22, protocol: example.com/ssh}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: web, namespace: default, generation: 2}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}, {{name: gone, port: 80}}]}}]
"""
)


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    (tmp_path / "all.yaml").write_text(textwrap.dedent(MANIFESTS))
    return tmp_path


def test_yaml_output_is_one_document_per_object(
    manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--manifests", str(manifests)]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("GatewayClass", "dragoman"),
        ("Gateway", "edge"),
        ("HTTPRoute", "web"),
    ]
    gateway_class, gateway, route = documents
    assert gateway_class["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert "namespace" not in gateway_class["metadata"]
    assert gateway["metadata"] == {"name": "edge", "namespace": "default", "generation": 3}
    assert [(c["type"], c["status"], c["reason"]) for c in gateway["status"]["conditions"]] == [
        ("Accepted", "True", "ListenersNotValid"),
        ("Programmed", "True", "Programmed"),
    ]
    ssh = gateway["status"]["listeners"][1]
    assert ssh["name"] == "ssh" and ssh["supportedKinds"] == []
    assert ssh["conditions"][0]["reason"] == "UnsupportedProtocol"
    [parent] = route["status"]["parents"]
    assert parent["controllerName"] == "dragoman.dev/gateway-controller"
    resolved = parent["conditions"][1]
    assert (resolved["type"], resolved["status"], resolved["reason"]) == (
        "ResolvedRefs",
        "False",
        "BackendNotFound",
    )
    assert "Service default/gone not found" in resolved["message"]
    every = [
        *gateway_class["status"]["conditions"],
        *gateway["status"]["conditions"],
        *(c for entry in gateway["status"]["listeners"] for c in entry["conditions"]),
        *parent["conditions"],
    ]
    assert all(RFC3339.fullmatch(c["lastTransitionTime"]) for c in every)
    assert {c["observedGeneration"] for c in parent["conditions"]} == {2}


def test_json_output_is_a_v1_list(manifests: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--manifests", str(manifests), "--output", "json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    assert [item["kind"] for item in listing["items"]] == ["GatewayClass", "Gateway", "HTTPRoute"]


def test_controller_name_option(manifests: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--manifests", str(manifests), "--controller-name", "x.dev/y"]) == 0
    # The class names another controller now: neither it nor its Gateway is dragoman's.
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["kind"], d["status"]) for d in documents] == [("HTTPRoute", {"parents": []})]


def test_manifest_errors_go_to_standard_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yaml").write_text(
        f"apiVersion: {GW}\nkind: GatewayClass\nmetadata: {{name: c}}\nspec: {{}}\n"
    )
    assert main(["status", "--manifests", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "GatewayClass/c: spec.controllerName: is required" in captured.err


def test_examples_are_accepted_and_programmed(capsys: pytest.CaptureFixture[str]) -> None:
    for directory in (EXAMPLES / "manifests", EXAMPLES / "compose"):
        assert main(["status", "--manifests", str(directory)]) == 0
        documents = list(yaml.safe_load_all(capsys.readouterr().out))
        kinds = [d["kind"] for d in documents]
        assert kinds[:2] == ["GatewayClass", "Gateway"], directory
        for document in documents:
            status = document["status"]
            assert all(c["status"] == "True" for c in status.get("conditions", [])), document
            for parent in status.get("parents", []):
                assert parent["conditions"][0]["status"] == "True", document
        refused = [
            c["reason"]
            for d in documents
            for p in d["status"].get("parents", [])
            for c in p["conditions"]
            if c["status"] != "True"
        ]
        # The demo's deliberately unsafe ExternalName (`localhost`) is the only one refused.
        assert refused == (["UnsafeExternalName"] if directory.name == "manifests" else [])


# --- lastTransitionTime ---------------------------------------------------------------------

T0, T1 = "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"


def cond(type: str, status: str, reason: str = "R") -> dict[str, object]:
    return {
        "type": type,
        "status": status,
        "observedGeneration": 1,
        "reason": reason,
        "message": "m",
    }


def test_unchanged_conditions_keep_their_time_and_changed_ones_get_now() -> None:
    computed = {
        "conditions": [cond("Accepted", "True"), cond("Programmed", "False")],
        "listeners": [{"name": "http", "conditions": [cond("Accepted", "True", "Other")]}],
    }
    first = stamp(computed, T0)
    assert {c["lastTransitionTime"] for c in first["conditions"]} == {T0}
    later = {
        "conditions": [cond("Accepted", "True", "Changed"), cond("Programmed", "True")],
        "listeners": [{"name": "http", "conditions": [cond("Accepted", "False")]}],
    }
    second = stamp(later, T1, previous=first)
    assert [c["lastTransitionTime"] for c in second["conditions"]] == [T0, T1]
    assert second["conditions"][0]["reason"] == "Changed"
    assert second["listeners"][0]["conditions"][0]["lastTransitionTime"] == T1
    assert list(second["conditions"][0]) == [
        "type",
        "status",
        "observedGeneration",
        "lastTransitionTime",
        "reason",
        "message",
    ]


def test_route_parents_are_matched_by_parent_ref_and_controller() -> None:
    ref = {"group": GW, "kind": "Gateway", "name": "a"}
    other = {"group": GW, "kind": "Gateway", "name": "b"}
    previous = stamp(
        {
            "parents": [
                {
                    "parentRef": ref,
                    "controllerName": "x/y",
                    "conditions": [cond("Accepted", "True")],
                }
            ]
        },
        T0,
    )
    now = stamp(
        {
            "parents": [
                {
                    "parentRef": other,
                    "controllerName": "x/y",
                    "conditions": [cond("Accepted", "True")],
                },
                {
                    "parentRef": dict(reversed(ref.items())),
                    "controllerName": "x/y",
                    "conditions": [cond("Accepted", "True")],
                },
            ]
        },
        T1,
        previous=previous,
    )
    assert [p["conditions"][0]["lastTransitionTime"] for p in now["parents"]] == [T1, T0]


POLICIES = """
---
apiVersion: dragoman.dev/v1alpha1
kind: BackendPolicy
metadata: {name: web-limits, namespace: default, generation: 4}
spec:
  targetRefs: [{group: "", kind: Service, name: web}, {group: "", kind: Service, name: gone}]
  circuitBreaker: {maxConnections: 7}
---
apiVersion: dragoman.dev/v1alpha1
kind: BackendPolicy
metadata: {name: broken, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: web}]
  healthCheck: {passive: {consecutive5XxErrors: -1}}
"""


def test_backend_policies_get_their_conditions_and_render_shows_their_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "all.yaml").write_text(textwrap.dedent(MANIFESTS) + POLICIES)

    assert main(["status", "--manifests", str(tmp_path)]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    policies = {d["metadata"]["name"]: d for d in documents if d["kind"] == "BackendPolicy"}
    assert policies["web-limits"]["apiVersion"] == "dragoman.dev/v1alpha1"
    verdicts = {
        entry["ancestorRef"]["name"]: entry["conditions"][0]
        for entry in policies["web-limits"]["status"]["ancestors"]
    }
    assert (verdicts["web"]["status"], verdicts["web"]["reason"]) == ("True", "Accepted")
    assert verdicts["web"]["observedGeneration"] == 4
    assert verdicts["gone"]["reason"] == "TargetNotFound"
    [broken] = policies["broken"]["status"]["ancestors"]
    assert broken["conditions"][0]["reason"] == "Invalid"
    assert "spec.healthCheck.passive.consecutive5XxErrors" in broken["conditions"][0]["message"]

    assert main(["render", "--manifests", str(tmp_path)]) == 0
    rendered = capsys.readouterr().out
    assert "max_connections: 7" in rendered and "outlier_detection" not in rendered


TRAFFIC_POLICIES = """
---
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackendTrafficPolicy
metadata: {name: web-traffic, namespace: default, generation: 3}
spec:
  targetRefs: [{group: "", kind: Service, name: web}, {group: "", kind: Service, name: gone}]
  retryConstraint: {budget: {percent: 30}, minRetryRate: {count: 2, interval: 1s}}
  sessionPersistence: {sessionName: pin, idleTimeout: 5m}
---
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackendTrafficPolicy
metadata: {name: broken-traffic, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: web}]
  retryConstraint: {budget: {percent: 120}}
"""


def test_traffic_policies_get_their_conditions_and_render_shows_their_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "all.yaml").write_text(textwrap.dedent(MANIFESTS) + TRAFFIC_POLICIES)

    assert main(["status", "--manifests", str(tmp_path)]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    policies = {d["metadata"]["name"]: d for d in documents if d["kind"] == "XBackendTrafficPolicy"}
    assert policies["web-traffic"]["apiVersion"] == "gateway.networking.x-k8s.io/v1alpha1"
    verdicts = {
        entry["ancestorRef"]["name"]: entry["conditions"][0]
        for entry in policies["web-traffic"]["status"]["ancestors"]
    }
    assert (verdicts["web"]["status"], verdicts["web"]["reason"]) == ("True", "Accepted")
    assert verdicts["web"]["observedGeneration"] == 3
    assert "UnsupportedValue: spec.sessionPersistence.idleTimeout" in verdicts["web"]["message"]
    assert verdicts["gone"]["reason"] == "TargetNotFound"
    [broken] = policies["broken-traffic"]["status"]["ancestors"]
    assert broken["conditions"][0]["reason"] == "Invalid"
    assert "spec.retryConstraint.budget.percent" in broken["conditions"][0]["message"]

    assert main(["render", "--manifests", str(tmp_path)]) == 0
    rendered = capsys.readouterr().out
    assert "budget_percent" in rendered and "min_retry_concurrency: 2" in rendered
    assert "envoy.http.stateful_session.cookie" in rendered
