"""`dragoman provision --manifests DIR`: the objects of each accepted Gateway as YAML that
Kubernetes accepts, its parameters applied; a Gateway that cannot be provisioned reported
(its condition, the field named) while the others are still printed."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from dragoman.cli import main
from tests.support.status_builds import DRAGOMAN_CLASS, GW

CLASS_WITH_PARAMETERS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: dragoman}
spec:
  controllerName: dragoman.dev/gateway-controller
  parametersRef: {group: dragoman.dev, kind: EnvoyProxyParameters, name: fleet, namespace: infra}
---
apiVersion: dragoman.dev/v1alpha1
kind: EnvoyProxyParameters
metadata: {name: fleet, namespace: infra}
spec: {replicas: 3, concurrency: 2, service: {type: NodePort}}
"""


def gateway(name: str, *listeners: str, extra: str = "") -> str:
    entries = "\n".join(f"  - {entry}" for entry in listeners)
    return f"""
---
apiVersion: {GW}
kind: Gateway
metadata: {{name: {name}, namespace: prod, uid: uid-{name}}}
spec:
  gatewayClassName: dragoman
{extra}  listeners:
{entries}
"""


def provision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> tuple[int, list[dict[str, Any]], str, str]:
    (tmp_path / "m.yaml").write_text(textwrap.dedent(text))
    code = main(["provision", "--manifests", str(tmp_path)])
    out, err = capsys.readouterr()
    return code, [doc for doc in yaml.safe_load_all(out) if doc], out, err


def find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in documents if (d["kind"], d["metadata"]["name"]) == (kind, name)]
    return found


def test_each_gateway_gets_valid_objects_with_its_class_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = (
        CLASS_WITH_PARAMETERS
        + gateway(
            "edge",
            "{name: http, port: 80, protocol: HTTP}",
            "{name: dns, port: 53, protocol: UDP}",
            extra="  infrastructure: {labels: {team: a}, annotations: {example.com/x: y}}\n",
        )
        + gateway("internal", "{name: db, port: 5432, protocol: TCP}")
    )
    code, documents, out, err = provision(tmp_path, capsys, manifests)
    assert code == 0, err
    assert len(documents) == 10
    for document in documents:
        kubernetes_validate.validate(document, kubernetes_validate.utils.latest_version(), True)
    assert "# Gateway/prod/edge: dragoman.dev/Provisioned=True (Provisioned)" in out
    assert "spiffe://dragoman.dev/gateway/prod/edge" in out
    deployment = find(documents, "Deployment", "dragoman-edge")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["labels"]["team"] == "a"
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == "uid-edge"
    service = find(documents, "Service", "dragoman-edge")["spec"]
    assert service["type"] == "NodePort"
    assert {(p["port"], p["protocol"]) for p in service["ports"]} == {(80, "TCP"), (53, "UDP")}
    internal = find(documents, "Service", "dragoman-internal")["spec"]["ports"]
    assert [p["port"] for p in internal] == [5432]
    # The bootstrap is printed as a block a reviewer can read.
    assert "  bootstrap.yaml: |\n" in out


def test_a_gateways_own_parameters_win_and_bad_ones_refuse_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = """
---
apiVersion: dragoman.dev/v1alpha1
kind: EnvoyProxyParameters
metadata: {name: one, namespace: prod}
spec: {replicas: 1}
---
apiVersion: dragoman.dev/v1alpha1
kind: EnvoyProxyParameters
metadata: {name: broken, namespace: prod}
spec: {replicas: -1, service: {type: Magic}}
"""

    def ref(name: str) -> str:
        return (
            "  infrastructure:\n    parametersRef: "
            f"{{group: dragoman.dev, kind: EnvoyProxyParameters, name: {name}}}\n"
        )

    manifests = (
        CLASS_WITH_PARAMETERS
        + own
        + gateway("good", "{name: http, port: 80, protocol: HTTP}", extra=ref("one"))
        + gateway("bad", "{name: http, port: 80, protocol: HTTP}", extra=ref("broken"))
    )
    code, documents, out, err = provision(tmp_path, capsys, manifests)
    assert code == 1
    assert find(documents, "Deployment", "dragoman-good")["spec"]["replicas"] == 1
    assert not [d for d in documents if d["metadata"]["name"] == "dragoman-bad"]
    assert "# Gateway/prod/bad: dragoman.dev/Provisioned=False (InvalidParameters)" in out
    assert "spec.replicas" in out and "spec.service.type" in out
    assert "problem: Gateway/prod/bad spec.infrastructure.parametersRef" in err


def test_a_port_or_a_name_that_cannot_be_had_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = """
---
apiVersion: v1
kind: ConfigMap
metadata: {name: dragoman-taken, namespace: prod}
data: {a: b}
"""
    manifests = (
        DRAGOMAN_CLASS
        + taken
        + gateway("stats", "{name: s, port: 8002, protocol: HTTP}")
        + gateway("taken", "{name: http, port: 80, protocol: HTTP}")
    )
    code, documents, out, _ = provision(tmp_path, capsys, manifests)
    assert code == 1
    assert documents == []  # nothing made for either
    assert "Provisioned=False (PortUnavailable)" in out
    assert "spec.listeners[0].port" in out
    assert "Provisioned=False (NameConflict)" in out
    assert "ConfigMap prod/dragoman-taken exists" in out


def test_what_provision_printed_is_the_gateways_own_when_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GitOps: the printed objects committed beside the Gateway (no uid there yet).
    manifests = DRAGOMAN_CLASS + gateway("edge", "{name: http, port: 80, protocol: HTTP}")
    manifests = manifests.replace("uid: uid-edge", "generation: 1")
    code, _, out, _ = provision(tmp_path, capsys, manifests)
    assert code == 0
    (tmp_path / "provisioned.yaml").write_text(out)
    code, documents, again, err = provision(tmp_path, capsys, manifests)
    assert (code, again) == (0, out), err
    assert len(documents) == 5


def test_gateways_of_other_controllers_get_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = DRAGOMAN_CLASS.replace("name: dragoman", "name: other").replace(
        "dragoman.dev/gateway-controller", "example.com/other"
    )
    manifests = other + gateway("edge", "{name: http, port: 80, protocol: HTTP}").replace(
        "gatewayClassName: dragoman", "gatewayClassName: other"
    )
    code, documents, out, _ = provision(tmp_path, capsys, manifests)
    assert (code, documents, out) == (0, [], "")


def test_the_listeners_of_an_attached_listener_set_are_exposed_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attached = f"""
---
apiVersion: {GW}
kind: ListenerSet
metadata: {{name: team-dns, namespace: prod}}
spec:
  parentRef: {{name: edge}}
  listeners: [{{name: dns, port: 53, protocol: UDP}}]
"""
    manifests = (
        DRAGOMAN_CLASS
        + gateway(
            "edge",
            "{name: http, port: 80, protocol: HTTP}",
            extra="  allowedListeners: {namespaces: {from: Same}}\n",
        )
        + attached
    )
    code, documents, _, err = provision(tmp_path, capsys, manifests)
    assert code == 0, err
    service = find(documents, "Service", "dragoman-edge")["spec"]
    assert {(p["port"], p["protocol"]) for p in service["ports"]} == {(80, "TCP"), (53, "UDP")}


def test_a_cert_manager_issuer_is_named_kind_slash_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(
        DRAGOMAN_CLASS + gateway("edge", "{name: http, port: 80, protocol: HTTP}")
    )
    argv = ["provision", "--manifests", str(tmp_path), "--cert-manager-issuer"]
    with pytest.raises(SystemExit):
        main([*argv, "dragoman-ca"])
    assert "ClusterIssuer/NAME" in capsys.readouterr().err
    assert main([*argv, "Issuer/ca"]) == 0
    out = capsys.readouterr().out
    documents = [d for d in yaml.safe_load_all(out) if d]
    certificate = find(documents, "Certificate", "dragoman-edge-xds")
    assert certificate["spec"]["uris"] == ["spiffe://dragoman.dev/gateway/prod/edge"]
    assert "from Secret dragoman-edge-xds, issued by cert-manager" in out
    # Without the issuer: no CA to sign with, so the Secret is said to be provided.
    assert main(argv[:-1]) == 0
    out = capsys.readouterr().out
    assert "from Secret dragoman-edge-xds, which must be provided" in out
    assert "#   the Secret dragoman-edge-xds must hold a client certificate for" in out
    assert "Certificate" not in [d["kind"] for d in yaml.safe_load_all(out) if d]
