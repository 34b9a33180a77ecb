"""Gateway API GatewayClass from decoded manifests, as its CRD validates."""

from __future__ import annotations

import re

from dragoman.objects import GatewayClass, ObjectMeta, ParametersRef
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_LABEL, GROUP, KIND, Format

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_CONTROLLER_NAME = re.compile(rf"{_SUBDOMAIN}/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+")

CONTROLLER_NAME = Format(
    'a domain-prefixed path such as "example.com/gateway-controller" (at most 253 characters)',
    lambda value: len(value) <= 253 and _CONTROLLER_NAME.fullmatch(value) is not None,
)


def parse_gateway_class(root: Node, meta: ObjectMeta) -> GatewayClass:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return GatewayClass(meta=meta)
    controller = spec.string("controllerName", required=True, format=CONTROLLER_NAME)
    spec.optional_string("description", max_length=64)
    parameters = spec.mapping("parametersRef")
    parameters_ref = None
    if parameters is not None:
        parameters_ref = ParametersRef(
            group=parameters.string("group", required=True, format=GROUP),
            kind=parameters.string("kind", required=True, format=KIND),
            name=parameters.string("name", required=True, min_length=1, max_length=253),
            namespace=parameters.optional_string("namespace", format=DNS1123_LABEL),
        )
    return GatewayClass(meta=meta, controller_name=controller, parameters_ref=parameters_ref)
