"""Gateway API kinds (gateway.networking.k8s.io/v1): Gateway, HTTPRoute and GRPCRoute."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, get_args

from dragoman.objects.gateway_class import ParametersRef
from dragoman.objects.meta import KindObject, ObjectMeta, no_entries
from dragoman.objects.selector import LabelSelector

GATEWAY_GROUP = "gateway.networking.k8s.io"

TLSMode = Literal["Terminate", "Passthrough"]
TLS_MODES: tuple[TLSMode, ...] = get_args(TLSMode)
# allowedRoutes.namespaces.from of a listener.
AllowedNamespaces = Literal["All", "Selector", "Same"]
ALLOWED_NAMESPACES: tuple[AllowedNamespaces, ...] = get_args(AllowedNamespaces)
# allowedListeners.namespaces.from of a Gateway.
AllowedListenerSets = Literal["All", "Selector", "Same", "None"]
ALLOWED_LISTENER_SETS: tuple[AllowedListenerSets, ...] = get_args(AllowedListenerSets)
PathMatchType = Literal["Exact", "PathPrefix", "RegularExpression"]
PATH_MATCH_TYPES: tuple[PathMatchType, ...] = get_args(PathMatchType)
# A header's, a query parameter's or a gRPC method's match.
MatchType = Literal["Exact", "RegularExpression"]
MATCH_TYPES: tuple[MatchType, ...] = get_args(MatchType)
PathModifierType = Literal["ReplaceFullPath", "ReplacePrefixMatch"]
PATH_MODIFIER_TYPES: tuple[PathModifierType, ...] = get_args(PathModifierType)
RedirectScheme = Literal["http", "https"]
REDIRECT_SCHEMES: tuple[RedirectScheme, ...] = get_args(RedirectScheme)


@dataclass(frozen=True, slots=True, order=True)
class RouteGroupKind:
    kind: str
    group: str = GATEWAY_GROUP

    def __str__(self) -> str:
        return f"{self.group}/{self.kind}" if self.group else self.kind


@dataclass(frozen=True, slots=True)
class CertificateRef:
    """A listener's tls.certificateRefs entry (a SecretObjectReference)."""

    name: str
    namespace: str | None = None  # None: the Gateway's namespace
    group: str = ""
    kind: str = "Secret"


@dataclass(frozen=True, slots=True)
class ListenerTLS:
    mode: TLSMode = "Terminate"
    certificate_refs: tuple[CertificateRef, ...] = ()


@dataclass(frozen=True, slots=True)
class GatewayListener:
    name: str
    port: int
    protocol: str = "HTTP"
    hostname: str | None = None
    # allowedRoutes.namespaces.from: "Same" (the API default), "All" or "Selector".
    allowed_namespaces: AllowedNamespaces = "Same"
    # allowedRoutes.namespaces.selector: which namespaces "Selector" admits.
    namespace_selector: LabelSelector | None = None
    # allowedRoutes.kinds; empty means every route kind the protocol supports.
    allowed_kinds: tuple[RouteGroupKind, ...] = ()
    tls: ListenerTLS | None = None


@dataclass(frozen=True, slots=True)
class GatewayAddress:
    """One of a Gateway's spec.addresses: a request for an address."""

    type: str = "IPAddress"  # IPAddress, Hostname, NamedAddress or a domain-prefixed type
    value: str = ""  # "" asks the implementation to choose one


# spec.tls.frontend validation modes: a client must present a certificate a CA vouches for,
# or any client gets through (the certificate, if any, is checked but not required).
FrontendValidationMode = Literal["AllowValidOnly", "AllowInsecureFallback"]
FRONTEND_VALIDATION_MODES: tuple[FrontendValidationMode, ...] = get_args(FrontendValidationMode)
ALLOW_VALID_ONLY: FrontendValidationMode = "AllowValidOnly"
ALLOW_INSECURE_FALLBACK: FrontendValidationMode = "AllowInsecureFallback"


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """A caCertificateRefs entry of spec.tls.frontend: any kind, in any namespace."""

    name: str
    kind: str
    group: str = ""
    namespace: str | None = None  # None: the Gateway's namespace


@dataclass(frozen=True, slots=True)
class FrontendValidation:
    """spec.tls.frontend.default, or one perPort entry's tls: how clients' certificates are
    validated. No CA references: this configuration validates nothing."""

    ca_certificate_refs: tuple[ObjectReference, ...] = ()
    mode: FrontendValidationMode = ALLOW_VALID_ONLY
    # Where it was written, for messages: "spec.tls.frontend.default" or ".perPort[i].tls".
    field: str = "spec.tls.frontend.default"


@dataclass(frozen=True, slots=True)
class FrontendTLS:
    """spec.tls.frontend: client certificate validation for the Gateway's TLS-terminating
    listeners, per port (`per_port`, port -> configuration) or else `default`."""

    default: FrontendValidation = FrontendValidation()
    per_port: tuple[tuple[int, FrontendValidation], ...] = ()

    def for_port(self, port: int) -> FrontendValidation:
        for number, validation in self.per_port:
            if number == port:
                return validation
        return self.default


@dataclass(frozen=True, slots=True)
class Gateway(KindObject):
    kind: ClassVar[str] = "Gateway"

    meta: ObjectMeta
    gateway_class_name: str = ""
    listeners: tuple[GatewayListener, ...] = ()
    addresses: tuple[GatewayAddress, ...] = ()
    # spec.infrastructure.parametersRef; refused unless provisioning reads it.
    parameters_ref: ParametersRef | None = None
    # spec.infrastructure.labels and .annotations: for the objects provisioned for it.
    infrastructure_labels: Mapping[str, str] = field(default_factory=no_entries)
    infrastructure_annotations: Mapping[str, str] = field(default_factory=no_entries)
    # spec.tls.backend.clientCertificateRef: what Envoy presents to backends it reaches by TLS.
    backend_client_certificate: CertificateRef | None = None
    # spec.tls.frontend: the client certificates its TLS-terminating listeners require.
    frontend_tls: FrontendTLS | None = None
    # spec.allowedListeners.namespaces: which ListenerSets may add listeners ("None", the
    # API default, "Same", "All" or "Selector" with `listener_set_selector`).
    allowed_listener_sets: AllowedListenerSets = "None"
    listener_set_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class ParentRef:
    name: str
    # None means the route's own namespace.
    namespace: str | None = None
    group: str = GATEWAY_GROUP
    kind: str = "Gateway"
    section_name: str | None = None
    port: int | None = None


@dataclass(frozen=True, slots=True)
class PathMatch:
    type: PathMatchType = "PathPrefix"
    value: str = "/"


@dataclass(frozen=True, slots=True)
class HeaderMatch:
    """A request header (or, in queryParams, a query parameter) that a match requires."""

    name: str
    value: str
    type: MatchType = "Exact"


@dataclass(frozen=True, slots=True)
class HTTPRouteMatch:
    path: PathMatch = PathMatch()
    headers: tuple[HeaderMatch, ...] = ()
    query_params: tuple[HeaderMatch, ...] = ()
    method: str | None = None  # GET, POST, ...; None matches every method


@dataclass(frozen=True, slots=True)
class HTTPHeader:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class HeaderModifier:
    """RequestHeaderModifier and ResponseHeaderModifier: set, add and remove headers."""

    set: tuple[HTTPHeader, ...] = ()
    add: tuple[HTTPHeader, ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PathModifier:
    type: PathModifierType
    value: str


@dataclass(frozen=True, slots=True)
class RequestRedirect:
    scheme: RedirectScheme | None = None  # None keeps the request's
    hostname: str | None = None
    path: PathModifier | None = None
    port: int | None = None
    status_code: int = 302


@dataclass(frozen=True, slots=True)
class URLRewrite:
    hostname: str | None = None
    path: PathModifier | None = None


@dataclass(frozen=True, slots=True)
class BackendRef:
    name: str
    # None means the route's own namespace.
    namespace: str | None = None
    group: str = ""
    kind: str = "Service"
    port: int | None = None
    weight: int = 1
    # Filters applied only to requests sent to this backend.
    filters: tuple[RouteFilter, ...] = ()


@dataclass(frozen=True, slots=True)
class RequestMirror:
    backend_ref: BackendRef
    # The share of requests mirrored, numerator/denominator (percent p is p/100).
    numerator: int = 100
    denominator: int = 100


@dataclass(frozen=True, slots=True)
class HTTPCORSFilter:
    """The CORS filter of an HTTPRoute rule: which cross-origin requests the route answers."""

    allow_origins: tuple[str, ...] = ()  # "*", or "<scheme>://<host>[:<port>]", host may be "*.x"
    allow_methods: tuple[str, ...] = ()  # method names, or "*"
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age_s: int = 5
    allow_credentials: bool = False


@dataclass(frozen=True, slots=True)
class ExtensionRef:
    """An ExtensionRef filter's object, in the route's namespace."""

    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class RouteFilter:
    """One HTTPRoute or GRPCRoute filter: `type` says which of the fields is set."""

    type: str
    request_header_modifier: HeaderModifier | None = None
    response_header_modifier: HeaderModifier | None = None
    request_redirect: RequestRedirect | None = None
    url_rewrite: URLRewrite | None = None
    request_mirror: RequestMirror | None = None
    cors: HTTPCORSFilter | None = None
    extension_ref: ExtensionRef | None = None


@dataclass(frozen=True, slots=True)
class HTTPRouteTimeouts:
    # Gateway API durations in milliseconds; 0 disables the timeout, None leaves it unset.
    request_ms: int | None = None
    backend_request_ms: int | None = None


@dataclass(frozen=True, slots=True)
class HTTPRouteRetry:
    """A rule's `retry` (GEP-1731): when and how often a failed backend request is retried."""

    codes: tuple[int, ...] = ()  # response status codes retried (400-599)
    attempts: int | None = None  # retries after the first attempt; None: dragoman's default
    backoff_ms: int | None = None  # Gateway API duration in milliseconds; None: Envoy's


@dataclass(frozen=True, slots=True)
class HTTPRouteRule:
    # The API defaults an absent list to one match: PathPrefix "/".
    matches: tuple[HTTPRouteMatch, ...] = (HTTPRouteMatch(),)
    backend_refs: tuple[BackendRef, ...] = ()
    filters: tuple[RouteFilter, ...] = ()
    timeouts: HTTPRouteTimeouts = HTTPRouteTimeouts()
    name: str | None = None
    retry: HTTPRouteRetry | None = None
    # Experimental-channel fields the rule sets that dragoman does not serve
    # ("sessionPersistence"): it says so rather than drop them unnoticed.
    experimental_fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HTTPRoute(KindObject):
    kind: ClassVar[str] = "HTTPRoute"

    meta: ObjectMeta
    parent_refs: tuple[ParentRef, ...] = ()
    hostnames: tuple[str, ...] = ()
    rules: tuple[HTTPRouteRule, ...] = ()


@dataclass(frozen=True, slots=True)
class GRPCMethodMatch:
    type: MatchType = "Exact"
    service: str | None = None  # None matches every service
    method: str | None = None  # None matches every method


@dataclass(frozen=True, slots=True)
class GRPCRouteMatch:
    method: GRPCMethodMatch | None = None  # None matches every service and method
    headers: tuple[HeaderMatch, ...] = ()


@dataclass(frozen=True, slots=True)
class GRPCRouteRule:
    # Absent or empty matches match every gRPC request.
    matches: tuple[GRPCRouteMatch, ...] = ()
    backend_refs: tuple[BackendRef, ...] = ()
    filters: tuple[RouteFilter, ...] = ()
    name: str | None = None


@dataclass(frozen=True, slots=True)
class GRPCRoute(KindObject):
    kind: ClassVar[str] = "GRPCRoute"

    meta: ObjectMeta
    parent_refs: tuple[ParentRef, ...] = ()
    hostnames: tuple[str, ...] = ()
    rules: tuple[GRPCRouteRule, ...] = ()


# The route kinds that attach to Gateways through parentRefs.
Route = HTTPRoute | GRPCRoute
