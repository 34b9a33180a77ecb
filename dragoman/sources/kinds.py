"""Every kind dragoman reads, one row each: the one table the parser, the Store, the
Kubernetes watches and RBAC, and the status writer derive theirs from.

Adding a kind: a typed object in `dragoman.objects`, a parser, a row here, and the Store field
the row names (declared in `dragoman.store`, where its type is spelled out for readers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dragoman.objects import (
    BackendTLSPolicy,
    ConfigMap,
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
)
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN, Format
from dragoman.sources.parsers.backend_tls import parse_backend_tls_policy
from dragoman.sources.parsers.core import parse_endpoint_slice, parse_service
from dragoman.sources.parsers.gateway import parse_gateway
from dragoman.sources.parsers.gateway_class import parse_gateway_class, parse_reference_grant
from dragoman.sources.parsers.grpc_route import parse_grpc_route
from dragoman.sources.parsers.http_route import parse_http_route
from dragoman.sources.parsers.l4_routes import parse_tcp_route, parse_tls_route, parse_udp_route
from dragoman.sources.parsers.listener_set import parse_listener_set
from dragoman.sources.parsers.secrets import parse_config_map, parse_namespace, parse_secret


@dataclass(frozen=True, slots=True)
class Kind:
    type: type[KubeObject]  # the typed object; its `kind` names the kind
    group: str  # "" for the core group
    versions: tuple[str, ...]  # the versions read, preferred first (the one watched)
    parse: Callable[[Node, ObjectMeta], KubeObject]  # a document, its metadata parsed
    store_field: str  # the Store mapping that holds objects of this kind
    plural: str  # the API resource: URLs, RBAC, kubectl
    # Service names become DNS labels themselves; most kinds allow DNS-1123 subdomains.
    name_format: Format = DNS1123_SUBDOMAIN
    # Cluster-scoped kinds (Namespace, GatewayClass) have no namespace: meta.namespace is "".
    namespaced: bool = True
    # Built-in kinds are listed through their generated API class (`api_class`, with methods
    # `list_namespaced_<stem>` / `list_<stem>_for_all_namespaces` / `list_<stem>`); custom
    # resources through CustomObjectsApi.
    api_class: str = ""
    stem: str = ""
    # dragoman writes this kind's status subresource when the build computes one.
    has_status: bool = False
    # A route: its status has one `parents` entry per parentRef.
    route: bool = False

    @property
    def kind(self) -> str:
        return self.type.kind

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


V1 = ("v1",)
V1_V1BETA1 = ("v1", "v1beta1")

# In the order the Kubernetes runtime lists them: Namespaces and backends before what uses them.
# fmt: off
KINDS: tuple[Kind, ...] = (
    Kind(Namespace, "", V1, parse_namespace, "namespaces", "namespaces",
         DNS1123_LABEL, namespaced=False, api_class="CoreV1Api", stem="namespace"),
    Kind(Service, "", V1, parse_service, "services", "services",
         DNS1035_LABEL, api_class="CoreV1Api", stem="service"),
    Kind(EndpointSlice, "discovery.k8s.io", V1, parse_endpoint_slice, "endpoint_slices",
         "endpointslices", api_class="DiscoveryV1Api", stem="endpoint_slice"),
    Kind(Secret, "", V1, parse_secret, "secrets", "secrets",
         api_class="CoreV1Api", stem="secret"),
    Kind(ConfigMap, "", V1, parse_config_map, "config_maps", "configmaps",
         api_class="CoreV1Api", stem="config_map"),
    Kind(GatewayClass, GATEWAY_GROUP, V1_V1BETA1, parse_gateway_class, "gateway_classes",
         "gatewayclasses", namespaced=False, has_status=True),
    Kind(Gateway, GATEWAY_GROUP, V1_V1BETA1, parse_gateway, "gateways", "gateways",
         has_status=True),
    Kind(HTTPRoute, GATEWAY_GROUP, V1_V1BETA1, parse_http_route, "http_routes", "httproutes",
         has_status=True, route=True),
    Kind(GRPCRoute, GATEWAY_GROUP, V1, parse_grpc_route, "grpc_routes", "grpcroutes",
         has_status=True, route=True),
    Kind(ReferenceGrant, GATEWAY_GROUP, V1_V1BETA1, parse_reference_grant, "reference_grants",
         "referencegrants"),
    Kind(BackendTLSPolicy, GATEWAY_GROUP, V1, parse_backend_tls_policy, "backend_tls_policies",
         "backendtlspolicies", has_status=True),
    Kind(ListenerSet, GATEWAY_GROUP, V1, parse_listener_set, "listener_sets", "listenersets",
         has_status=True),
    Kind(TCPRoute, GATEWAY_GROUP, V1, parse_tcp_route, "tcp_routes", "tcproutes",
         has_status=True, route=True),
    Kind(TLSRoute, GATEWAY_GROUP, V1, parse_tls_route, "tls_routes", "tlsroutes",
         has_status=True, route=True),
    Kind(UDPRoute, GATEWAY_GROUP, V1, parse_udp_route, "udp_routes", "udproutes",
         has_status=True, route=True),
)
# fmt: on

KINDS_BY_GROUP_KIND: Mapping[tuple[str, str], Kind] = {(k.group, k.kind): k for k in KINDS}
KINDS_BY_TYPE: Mapping[type, Kind] = {k.type: k for k in KINDS}
# Kind names are unique across the groups dragoman reads: status keys name kinds alone.
KINDS_BY_NAME: Mapping[str, Kind] = {k.kind: k for k in KINDS}
assert len(KINDS_BY_NAME) == len(KINDS_BY_GROUP_KIND) == len(KINDS), "a kind listed twice"
