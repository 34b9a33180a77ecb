"""EnvoyProxyParameters: each field read, each bad value refused with its field named, and a
Gateway's own object overriding its class's field by field."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.objects import Gateway, GatewayClass, ObjectMeta
from dragoman.objects.gateway_class import ParametersRef
from dragoman.provisioning.parameters import (
    API_VERSION,
    GROUP,
    KIND,
    EnvoyProxyParameters,
    EnvoyProxySettings,
    parse_parameters,
)
from dragoman.provisioning.resolve import claim_parameters, resolve_settings
from dragoman.store import Store


def parameters(spec: dict[str, Any], name: str = "big", namespace: str = "prod") -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def test_every_field_is_read() -> None:
    parsed = parse_parameters(
        parameters(
            {
                "replicas": 3,
                "image": "registry.example.com/envoy:v1.40.0",
                "concurrency": 4,
                "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "2Gi"}},
                "service": {"type": "NodePort", "externalTrafficPolicy": "Cluster"},
            }
        ),
        "default",
    )
    assert parsed.problems == ()
    assert (parsed.namespace, parsed.name) == ("prod", "big")
    assert parsed.settings == EnvoyProxySettings(
        replicas=3,
        image="registry.example.com/envoy:v1.40.0",
        concurrency=4,
        resources={"requests": {"cpu": "500m"}, "limits": {"memory": "2Gi"}},
        service_type="NodePort",
        external_traffic_policy="Cluster",
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"replicas": -1}, "spec.replicas"),
        ({"replicas": "2"}, "spec.replicas"),
        ({"concurrency": 0}, "spec.concurrency"),
        ({"image": "envoy latest"}, "spec.image"),
        ({"service": {"type": "ExternalName"}}, "spec.service.type"),
        ({"service": {"externalTrafficPolicy": "Nearest"}}, "spec.service.externalTrafficPolicy"),
        (
            {"service": {"type": "ClusterIP", "externalTrafficPolicy": "Local"}},
            "spec.service.externalTrafficPolicy",
        ),
        ({"resources": {"requests": {"cpu": "lots"}}}, "spec.resources.requests.cpu"),
        ({"resources": {"requests": {"gpu": "1"}}}, "spec.resources.requests.gpu"),
        ({"resources": {"claims": []}}, "spec.resources.claims"),
    ],
)
def test_a_bad_value_is_refused_naming_its_field(spec: dict[str, Any], field: str) -> None:
    parsed = parse_parameters(parameters(spec), "default")
    assert [path for path, _ in parsed.problems] == [field]


def _gateway(ref: ParametersRef | None = None) -> Gateway:
    return Gateway(
        meta=ObjectMeta("edge", "prod"), gateway_class_name="dragoman", parameters_ref=ref
    )


def _class(ref: ParametersRef | None) -> GatewayClass:
    return GatewayClass(meta=ObjectMeta("dragoman", ""), controller_name="c", parameters_ref=ref)


def _known(*objects: EnvoyProxyParameters) -> dict[tuple[str, str], EnvoyProxyParameters]:
    return {(p.namespace, p.name): p for p in objects}


def test_the_gateways_parameters_override_the_classes_field_by_field() -> None:
    of_class = EnvoyProxyParameters(
        "infra", "default", EnvoyProxySettings(replicas=2, image="envoy:a", concurrency=2)
    )
    of_gateway = EnvoyProxyParameters("prod", "big", EnvoyProxySettings(replicas=5))
    settings, problems = resolve_settings(
        _gateway(ParametersRef(GROUP, KIND, "big")),
        _class(ParametersRef(GROUP, KIND, "default", "infra")),
        _known(of_class, of_gateway),
    )
    assert problems == []
    assert settings == EnvoyProxySettings(replicas=5, image="envoy:a", concurrency=2)


OWN = "spec.infrastructure.parametersRef"
OF_CLASS = "GatewayClass 'dragoman' spec.parametersRef"


@pytest.mark.parametrize(
    ("gateway_ref", "class_ref", "field", "words"),
    [
        (ParametersRef(GROUP, KIND, "absent"), None, OWN, "does not exist"),
        (ParametersRef("example.com", "Other", "x"), None, OWN, f"reads {GROUP}/{KIND} only"),
        (ParametersRef(GROUP, KIND, "bad"), None, OWN, "spec.replicas"),
        (None, ParametersRef(GROUP, KIND, "big"), OF_CLASS, "needs a namespace"),
    ],
)
def test_a_reference_that_cannot_be_used_is_a_problem_of_the_gateway(
    gateway_ref: ParametersRef | None, class_ref: ParametersRef | None, field: str, words: str
) -> None:
    bad = parse_parameters(parameters({"replicas": -3}, name="bad"), "default")
    good = EnvoyProxyParameters("prod", "big", EnvoyProxySettings(replicas=1))
    _, problems = resolve_settings(_gateway(gateway_ref), _class(class_ref), _known(bad, good))
    [problem] = problems
    assert (problem.field, problem.reason) == (field, "InvalidParameters")
    assert words in problem.message
    assert problem.object == _gateway().key


def test_claiming_takes_off_only_the_references_provisioning_reads() -> None:
    ours = _gateway(ParametersRef(GROUP, KIND, "big"))
    other = Gateway(
        meta=ObjectMeta("other", "prod"),
        gateway_class_name="dragoman",
        parameters_ref=ParametersRef("example.com", "Other", "x"),
    )
    store = Store.from_objects([ours, other, _class(ParametersRef(GROUP, KIND, "d", "infra"))])
    claimed = claim_parameters(store)
    assert claimed.gateways[("prod", "edge")].parameters_ref is None
    assert claimed.gateways[("prod", "other")] == other
    assert claimed.gateway_classes[("", "dragoman")].parameters_ref is None
