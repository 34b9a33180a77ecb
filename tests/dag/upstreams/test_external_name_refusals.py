"""Unsafe ExternalNames, from YAML to the route's status: each is refused with its own reason
(not as a missing Service), and no cluster is ever built for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.dag.build import build
from dragoman.objects import ObjectKey
from dragoman.sources.manifests import ManifestDirectory
from dragoman.store import Store

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: target, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: target, namespace: default}
spec:
  type: ExternalName
  externalName: "%s"
  ports: [{port: 80}]
"""


@pytest.mark.parametrize(
    ("external_name", "says"),
    [
        ("LOCALHOST", "points to localhost"),
        ("LocalHost.", "points to localhost"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.169.254", "169.254.169.254"),
        ("0.0.0.0", "0.0.0.0"),
        ("http://api.example.com", "not a valid DNS name"),
        ("intranet", "single"),
    ],
)
def test_unsafe_external_name_is_refused_on_the_route_with_its_reason(
    tmp_path: Path, external_name: str, says: str
) -> None:
    (tmp_path / "all.yaml").write_text(ROUTE % external_name)
    result = ManifestDirectory(tmp_path).load()
    assert result.errors == ()  # the Service itself is a valid object

    dag = build(Store.from_objects(result.objects))

    assert dag.clusters == {}
    [problem] = [p for p in dag.problems if p.object == ObjectKey("HTTPRoute", "default", "r")]
    assert problem.reason == "UnsafeExternalName"
    assert problem.field == "spec.rules[0].backendRefs[0]"
    assert says in problem.message.lower() or says in problem.message
    status = dag.statuses[ObjectKey("HTTPRoute", "default", "r")].status
    [parent] = status["parents"]
    resolved = {c["type"]: c for c in parent["conditions"]}["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "UnsafeExternalName")
