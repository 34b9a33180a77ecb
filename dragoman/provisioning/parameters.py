"""EnvoyProxyParameters (dragoman.dev/v1alpha1): how the Envoys provisioned for a Gateway run.

A GatewayClass names one in `spec.parametersRef` (with its namespace), a Gateway in
`spec.infrastructure.parametersRef` (in the Gateway's namespace); a field the Gateway's
object sets wins over the class's, field by field. Checked as deploy/'s CRD checks it, so an
object the API server would refuse is refused here too, naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

from dragoman.objects.gateway_class import ParametersRef
from dragoman.objects.meta import DRAGOMAN_GROUP
from dragoman.sources.errors import FieldProblem
from dragoman.sources.fields import Node

GROUP = DRAGOMAN_GROUP
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "EnvoyProxyParameters"

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
SERVICE_TYPES: tuple[ServiceType, ...] = get_args(ServiceType)
TrafficPolicy = Literal["Local", "Cluster"]
TRAFFIC_POLICIES: tuple[TrafficPolicy, ...] = get_args(TrafficPolicy)
RESOURCE_NAMES = ("cpu", "memory", "ephemeral-storage")
MAX_REPLICAS = 1000
MAX_CONCURRENCY = 1024
# A Kubernetes quantity: `100m`, `128Mi`, `1.5`, `2e3`.
_QUANTITY = re.compile(r"[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?")
# What a container image reference may hold (name[:tag][@digest]), whitespace never.
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:@-]*[A-Za-z0-9_]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class EnvoyProxySettings:
    """The settings of one parameters object; None: not set there (the default applies)."""

    replicas: int | None = None
    image: str | None = None
    concurrency: int | None = None
    # {"requests": {"cpu": "100m"}, "limits": {...}}, as a container's `resources`.
    resources: Mapping[str, Mapping[str, str]] | None = None
    service_type: ServiceType | None = None
    external_traffic_policy: TrafficPolicy | None = None

    def overridden_by(self, other: EnvoyProxySettings) -> EnvoyProxySettings:
        """These settings with every field `other` sets taken from `other`."""
        changes = {
            f.name: getattr(other, f.name)
            for f in fields(other)
            if getattr(other, f.name) is not None
        }
        return replace(self, **changes)


NO_SETTINGS = EnvoyProxySettings()


@dataclass(frozen=True, slots=True)
class EnvoyProxyParameters:
    namespace: str
    name: str
    settings: EnvoyProxySettings
    # (field, message) for each value refused; a refused object is used for nothing.
    problems: tuple[FieldProblem, ...] = ()


def is_parameters_ref(ref: ParametersRef) -> bool:
    return (ref.group, ref.kind) == (GROUP, KIND)


def parse_parameters(doc: Mapping[str, Any], default_namespace: str) -> EnvoyProxyParameters:
    """One EnvoyProxyParameters document (its apiVersion and kind already matched)."""
    problems: list[FieldProblem] = []
    root = Node(doc, "", problems)
    meta = root.mapping("metadata", required=True)
    name = meta.string("name", required=True, min_length=1, max_length=253) if meta else ""
    namespace = (meta.string("namespace") if meta else "") or default_namespace
    spec = root.mapping("spec")
    settings = _settings(spec) if spec is not None else NO_SETTINGS
    return EnvoyProxyParameters(namespace, name, settings, tuple(problems))


def _settings(spec: Node) -> EnvoyProxySettings:
    service = spec.mapping("service")
    service_type = external = None
    if service is not None:
        service_type = service.optional_choice("type", SERVICE_TYPES)
        external = service.optional_choice("externalTrafficPolicy", TRAFFIC_POLICIES)
        if service_type == "ClusterIP" and external is not None:
            service.report(
                service.at("externalTrafficPolicy"),
                "only a NodePort or LoadBalancer Service has an externalTrafficPolicy",
            )
    image = spec.optional_string("image", min_length=1, max_length=512)
    if image is not None and not _IMAGE.fullmatch(image):
        spec.expected(spec.at("image"), "a container image reference", image)
    return EnvoyProxySettings(
        replicas=spec.optional_integer("replicas", minimum=0, maximum=MAX_REPLICAS),
        image=image,
        concurrency=spec.optional_integer("concurrency", minimum=1, maximum=MAX_CONCURRENCY),
        resources=_resources(spec),
        service_type=service_type,
        external_traffic_policy=external,
    )


def _resources(spec: Node) -> Mapping[str, Mapping[str, str]] | None:
    resources = spec.mapping("resources")
    if resources is None:
        return None
    result: dict[str, Mapping[str, str]] = {}
    for key in resources.data:
        if key not in ("requests", "limits"):
            resources.report(resources.at(str(key)), "expected requests or limits")
    for part in ("requests", "limits"):
        quantities = dict(resources.string_map(part))
        for name, quantity in quantities.items():
            path = f"{resources.at(part)}.{name}"
            if name not in RESOURCE_NAMES:
                resources.report(path, f"expected one of {', '.join(RESOURCE_NAMES)}")
            elif not _QUANTITY.fullmatch(quantity):
                resources.expected(path, "a quantity such as 100m or 128Mi", quantity)
        if quantities:
            result[part] = quantities
    return result
