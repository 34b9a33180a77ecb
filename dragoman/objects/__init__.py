"""Typed Kubernetes objects: what sources produce and the DAG reads.

Sources turn YAML/JSON into these once, at the boundary; nothing deeper parses dicts.
"""

from dragoman.objects.core import (
    Endpoint,
    EndpointPort,
    EndpointSlice,
    Service,
    ServicePort,
)
from dragoman.objects.gateway import (
    BackendRef,
    Gateway,
    GatewayListener,
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRule,
    ParentRef,
    PathMatch,
)
from dragoman.objects.meta import ObjectKey, ObjectMeta

KubeObject = Service | EndpointSlice | Gateway | HTTPRoute

__all__ = [
    "BackendRef",
    "Endpoint",
    "EndpointPort",
    "EndpointSlice",
    "Gateway",
    "GatewayListener",
    "HTTPRoute",
    "HTTPRouteMatch",
    "HTTPRouteRule",
    "KubeObject",
    "ObjectKey",
    "ObjectMeta",
    "ParentRef",
    "PathMatch",
    "Service",
    "ServicePort",
]
