"""Typed Kubernetes objects: what sources produce and the DAG reads.

Sources turn YAML/JSON into these once, at the boundary; nothing deeper parses dicts.
"""

from typing import ClassVar, Protocol

from dragoman.objects.backend_policy import BackendPolicy
from dragoman.objects.backend_tls import (
    BackendTLSPolicy,
    CACertificateRef,
    PolicyTargetRef,
    SubjectAltName,
)
from dragoman.objects.config_map import ConfigMap
from dragoman.objects.credential_injector import (
    CredentialInjector,
    CredentialSecretRef,
    OAuth2ClientCredentials,
    TokenEndpoint,
)
from dragoman.objects.endpoint_slice import Endpoint, EndpointPort, EndpointSlice
from dragoman.objects.gateway import (
    BackendRef,
    CertificateRef,
    ExtensionRef,
    Gateway,
    GatewayAddress,
    GatewayListener,
    GRPCMethodMatch,
    GRPCRoute,
    GRPCRouteMatch,
    GRPCRouteRule,
    HeaderMatch,
    HeaderModifier,
    HTTPCORSFilter,
    HTTPHeader,
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRetry,
    HTTPRouteRule,
    HTTPRouteTimeouts,
    ListenerTLS,
    ParentRef,
    PathMatch,
    PathModifier,
    RequestMirror,
    RequestRedirect,
    RouteFilter,
    RouteGroupKind,
    URLRewrite,
)
from dragoman.objects.gateway_class import GatewayClass, ParametersRef
from dragoman.objects.l4_routes import L4Route, L4RouteRule, TCPRoute, TLSRoute, UDPRoute
from dragoman.objects.listener_set import ListenerSet, ListenerSetParent
from dragoman.objects.meta import ObjectKey, ObjectMeta
from dragoman.objects.namespace import Namespace
from dragoman.objects.reference_grant import ReferenceGrant, ReferenceGrantFrom, ReferenceGrantTo
from dragoman.objects.secret import Secret
from dragoman.objects.selector import LabelSelector, LabelSelectorRequirement
from dragoman.objects.service import Service, ServicePort
from dragoman.objects.xbackend import XBackend


class KubeObject(Protocol):
    """Any object a source reads. The kinds: `dragoman.objects.kinds.KINDS`."""

    kind: ClassVar[str]

    @property
    def meta(self) -> ObjectMeta: ...

    @property
    def key(self) -> ObjectKey: ...


__all__ = [
    "BackendPolicy",
    "BackendRef",
    "BackendTLSPolicy",
    "CACertificateRef",
    "CertificateRef",
    "ConfigMap",
    "CredentialInjector",
    "CredentialSecretRef",
    "Endpoint",
    "EndpointPort",
    "EndpointSlice",
    "ExtensionRef",
    "GRPCMethodMatch",
    "GRPCRoute",
    "GRPCRouteMatch",
    "GRPCRouteRule",
    "Gateway",
    "GatewayAddress",
    "GatewayClass",
    "GatewayListener",
    "HTTPCORSFilter",
    "HTTPHeader",
    "HTTPRoute",
    "HTTPRouteMatch",
    "HTTPRouteRetry",
    "HTTPRouteRule",
    "HTTPRouteTimeouts",
    "HeaderMatch",
    "HeaderModifier",
    "KubeObject",
    "L4Route",
    "L4RouteRule",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ListenerSet",
    "ListenerSetParent",
    "ListenerTLS",
    "Namespace",
    "OAuth2ClientCredentials",
    "ObjectKey",
    "ObjectMeta",
    "ParametersRef",
    "ParentRef",
    "PathMatch",
    "PathModifier",
    "PolicyTargetRef",
    "ReferenceGrant",
    "ReferenceGrantFrom",
    "ReferenceGrantTo",
    "RequestMirror",
    "RequestRedirect",
    "RouteFilter",
    "RouteGroupKind",
    "Secret",
    "Service",
    "ServicePort",
    "SubjectAltName",
    "TCPRoute",
    "TLSRoute",
    "TokenEndpoint",
    "UDPRoute",
    "URLRewrite",
    "XBackend",
]
