"""How each kind in the table of kinds (`dragoman.objects.kinds`) is read: its parser, and the
names its API allows.

Adding a kind: its row in `dragoman.objects.kinds`, then its parser here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dragoman.objects import (
    BackendPolicy,
    BackendTLSPolicy,
    ConfigMap,
    CredentialInjector,
    EndpointSlice,
    Gateway,
    GatewayClass,
    GRPCRoute,
    HTTPRoute,
    KubeObject,
    ListenerSet,
    Namespace,
    ObjectMeta,
    ReferenceGrant,
    Secret,
    Service,
    TCPRoute,
    TLSRoute,
    UDPRoute,
    XBackend,
)
from dragoman.objects.kinds import KINDS
from dragoman.objects.xbackend_traffic_policy import XBackendTrafficPolicy
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN, Format
from dragoman.sources.parsers.backend_policy import parse_backend_policy
from dragoman.sources.parsers.backend_tls import parse_backend_tls_policy
from dragoman.sources.parsers.config_map import parse_config_map
from dragoman.sources.parsers.credential_injector import parse_credential_injector
from dragoman.sources.parsers.endpoint_slice import parse_endpoint_slice
from dragoman.sources.parsers.gateway import parse_gateway
from dragoman.sources.parsers.gateway_class import parse_gateway_class
from dragoman.sources.parsers.grpc_route import parse_grpc_route
from dragoman.sources.parsers.http_route import parse_http_route
from dragoman.sources.parsers.l4_routes import parse_tcp_route, parse_tls_route, parse_udp_route
from dragoman.sources.parsers.listener_set import parse_listener_set
from dragoman.sources.parsers.namespace import parse_namespace
from dragoman.sources.parsers.reference_grant import parse_reference_grant
from dragoman.sources.parsers.secret import parse_secret
from dragoman.sources.parsers.service import parse_service
from dragoman.sources.parsers.xbackend import parse_xbackend
from dragoman.sources.parsers.xbackend_traffic_policy import parse_xbackend_traffic_policy


@dataclass(frozen=True, slots=True)
class KindParser:
    parse: Callable[[Node, ObjectMeta], KubeObject]  # a document, its metadata parsed
    # Service names become DNS labels themselves; most kinds allow DNS-1123 subdomains.
    name_format: Format = DNS1123_SUBDOMAIN


# By the kind's typed object.
PARSERS: Mapping[type, KindParser] = {
    Namespace: KindParser(parse_namespace, DNS1123_LABEL),
    Service: KindParser(parse_service, DNS1035_LABEL),
    EndpointSlice: KindParser(parse_endpoint_slice),
    Secret: KindParser(parse_secret),
    ConfigMap: KindParser(parse_config_map),
    GatewayClass: KindParser(parse_gateway_class),
    Gateway: KindParser(parse_gateway),
    HTTPRoute: KindParser(parse_http_route),
    GRPCRoute: KindParser(parse_grpc_route),
    ReferenceGrant: KindParser(parse_reference_grant),
    BackendTLSPolicy: KindParser(parse_backend_tls_policy),
    ListenerSet: KindParser(parse_listener_set),
    TCPRoute: KindParser(parse_tcp_route),
    TLSRoute: KindParser(parse_tls_route),
    UDPRoute: KindParser(parse_udp_route),
    XBackend: KindParser(parse_xbackend),
    BackendPolicy: KindParser(parse_backend_policy),
    XBackendTrafficPolicy: KindParser(parse_xbackend_traffic_policy),
    CredentialInjector: KindParser(parse_credential_injector),
}
assert set(PARSERS) == {kind.type for kind in KINDS}, "a kind without a parser, or the reverse"
