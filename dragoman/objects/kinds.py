"""Every kind dragoman reads, one row each: the one table the Store, the parser, the
Kubernetes watches and RBAC, and the status writer derive theirs from.

Adding a kind: a typed object in `dragoman.objects`, a row here, the Store field the row names
(declared in `dragoman.store`, where its type is spelled out for readers), and its parser
(`dragoman.sources.kind_parsers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.objects.backend_policy import BackendPolicy
from dragoman.objects.backend_tls import BackendTLSPolicy
from dragoman.objects.config_map import ConfigMap
from dragoman.objects.credential_injector import CredentialInjector
from dragoman.objects.endpoint_slice import EndpointSlice
from dragoman.objects.gateway import GATEWAY_GROUP, Gateway, GRPCRoute, HTTPRoute
from dragoman.objects.gateway_class import GatewayClass
from dragoman.objects.l4_routes import TCPRoute, TLSRoute, UDPRoute
from dragoman.objects.listener_set import ListenerSet
from dragoman.objects.meta import DRAGOMAN_GROUP, KindObject
from dragoman.objects.namespace import Namespace
from dragoman.objects.reference_grant import ReferenceGrant
from dragoman.objects.secret import Secret
from dragoman.objects.service import Service
from dragoman.objects.xbackend import XBACKEND_GROUP, XBackend
from dragoman.objects.xbackend_traffic_policy import XBackendTrafficPolicy


@dataclass(frozen=True, slots=True)
class Kind:
    type: type[KindObject]  # the typed object; its `kind` names the kind
    group: str  # "" for the core group
    versions: tuple[str, ...]  # the versions read, preferred first (the one watched)
    store_field: str  # the Store mapping that holds objects of this kind
    plural: str  # the API resource: URLs, RBAC, kubectl
    # Cluster-scoped kinds (Namespace, GatewayClass) have no namespace: meta.namespace is "".
    namespaced: bool = True
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
    Kind(Namespace, "", V1, "namespaces", "namespaces", namespaced=False),
    Kind(Service, "", V1, "services", "services"),
    Kind(EndpointSlice, "discovery.k8s.io", V1, "endpoint_slices", "endpointslices"),
    Kind(Secret, "", V1, "secrets", "secrets"),
    Kind(ConfigMap, "", V1, "config_maps", "configmaps"),
    Kind(GatewayClass, GATEWAY_GROUP, V1_V1BETA1, "gateway_classes", "gatewayclasses",
         namespaced=False, has_status=True),
    Kind(Gateway, GATEWAY_GROUP, V1_V1BETA1, "gateways", "gateways", has_status=True),
    Kind(HTTPRoute, GATEWAY_GROUP, V1_V1BETA1, "http_routes", "httproutes",
         has_status=True, route=True),
    Kind(GRPCRoute, GATEWAY_GROUP, V1, "grpc_routes", "grpcroutes", has_status=True, route=True),
    Kind(ReferenceGrant, GATEWAY_GROUP, V1_V1BETA1, "reference_grants", "referencegrants"),
    Kind(BackendTLSPolicy, GATEWAY_GROUP, V1, "backend_tls_policies", "backendtlspolicies",
         has_status=True),
    Kind(ListenerSet, GATEWAY_GROUP, V1, "listener_sets", "listenersets", has_status=True),
    Kind(TCPRoute, GATEWAY_GROUP, V1, "tcp_routes", "tcproutes", has_status=True, route=True),
    Kind(TLSRoute, GATEWAY_GROUP, V1, "tls_routes", "tlsroutes", has_status=True, route=True),
    Kind(UDPRoute, GATEWAY_GROUP, V1, "udp_routes", "udproutes", has_status=True, route=True),
    # Experimental channel: its CRD may be absent (then nothing is listed, and that is fine).
    Kind(XBackend, XBACKEND_GROUP, ("v1alpha1",), "xbackends", "xbackends", has_status=True),
    Kind(BackendPolicy, DRAGOMAN_GROUP, ("v1alpha1",), "backend_policies", "backendpolicies",
         has_status=True),
    # Experimental too (GEP-3388): watched when its CRD is installed.
    Kind(XBackendTrafficPolicy, XBACKEND_GROUP, ("v1alpha1",), "xbackend_traffic_policies",
         "xbackendtrafficpolicies", has_status=True),
    Kind(CredentialInjector, DRAGOMAN_GROUP, ("v1alpha1",), "credential_injectors",
         "credentialinjectors", has_status=True),
)
# fmt: on

KINDS_BY_GROUP_KIND: Mapping[tuple[str, str], Kind] = {(k.group, k.kind): k for k in KINDS}
KINDS_BY_TYPE: Mapping[type, Kind] = {k.type: k for k in KINDS}
# Kind names are unique across the groups dragoman reads: status keys name kinds alone.
KINDS_BY_NAME: Mapping[str, Kind] = {k.kind: k for k in KINDS}
assert len(KINDS_BY_NAME) == len(KINDS_BY_GROUP_KIND) == len(KINDS), "a kind listed twice"
