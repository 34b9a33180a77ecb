"""What a DAG build produces. Plain values: no protobuf, no I/O.

The envoy package translates these into xDS resources; tests compare them directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

# A Dag's load assignments may be a patch of the previous Dag's, which says what it changed.
from dragoman.dag.patched_mapping import changed_keys_since as changed_keys_since
from dragoman.objects import ObjectKey
from dragoman.objects.backend_policy import (
    ActiveHealthCheck,
    CircuitBreaker,
    Http2Keepalive,
    LoadBalancer,
    PassiveHealthCheck,
    TcpKeepalive,
)
from dragoman.objects.gateway import PathMatchType as PathMatchType
from dragoman.objects.gateway import PathModifierType as PathRewriteType
from dragoman.objects.xbackend_traffic_policy import RetryBudget
from dragoman.snapshots.resources import ALL_GATEWAYS as ALL_GATEWAYS

# Upstream protocols a cluster speaks. Plain HTTP/1.1 is the default (over TLS: HTTP/2 when
# the upstream offers it by ALPN, else HTTP/1.1); "h2c" is HTTP/2 over cleartext (GRPCRoute
# backends, Service ports with appProtocol kubernetes.io/h2c); "h2" is HTTP/2 over TLS only
# (ALPN h2), what h2c becomes on a port dragoman reaches over TLS; "h1" is HTTP/1.1 over TLS
# only (ALPN http/1.1 alone: an XBackend's protocol HTTP11).
HTTP1: Final = "http1"
H2C: Final = "h2c"
H2: Final = "h2"
H1: Final = "h1"
# Whole connections (TCPRoute, TLSRoute) and datagrams (UDPRoute): bytes passed as they come,
# with TLS only where a BackendTLSPolicy asks for it (TCP).
TCP: Final = "tcp"
UDP: Final = "udp"
L4_PROTOCOLS = (TCP, UDP)
L4Protocol = Literal["tcp", "udp"]
UpstreamProtocol = Literal["http1", "h2c", "h2", "h1", "tcp", "udp"]

# How a path is matched (RE2 for RegularExpression) and how a rewrite replaces it are the
# Gateway API's own choices (PathMatchType, PathRewriteType), imported above.
# Which of a name's addresses are used: Envoy's DnsLookupFamily names.
LookupFamily = Literal["V4_ONLY", "V6_ONLY", "V4_PREFERRED", "ALL"]
# The address family a host with both tries first: Envoy's FirstAddressFamilyVersion names.
AddressFamily = Literal["V4", "V6"]


@dataclass(frozen=True, slots=True)
class SubjectAltNameMatch:
    """A name the upstream's certificate must carry: san_type "DNS" or "URI", matched exactly
    (a DNS wildcard in the certificate covers one label, as in every TLS client)."""

    san_type: Literal["DNS", "URI"]
    value: str


@dataclass(frozen=True, slots=True)
class TlsParameters:
    """TLS versions, cipher suites and key exchange groups Envoy offers an upstream (a
    BackendTLSPolicy's dragoman.dev/ options), as Envoy names them; unset: Envoy's defaults."""

    min_version: str | None = None  # "TLSv1_0" .. "TLSv1_3"
    max_version: str | None = None
    cipher_suites: tuple[str, ...] = ()  # TLS 1.2 and below (TLS 1.3's are not configurable)
    ecdh_curves: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """How Envoy originates TLS to a cluster. The name is always verified, never the chain alone.

    `sni` None: the SNI is the endpoint's hostname (an ExternalName's external name) and the
    certificate must carry it (Envoy's auto_host_sni and auto_sni_san_validation). Otherwise
    `subject_alt_names` lists the names accepted (at least one).
    """

    sni: str | None = None
    subject_alt_names: tuple[SubjectAltNameMatch, ...] = ()
    # PEM CA certificates to trust; None: the system CA bundle (a TranslateOptions path).
    trusted_ca: bytes | None = None
    policy: ObjectKey | None = None  # the BackendTLSPolicy that asked for it, if any
    # What Envoy presents when the upstream asks for a client certificate: the backend's own
    # (an XBackend's clientCertificateRef, a BackendTLSPolicy's dragoman.dev/client-certificate
    # option), else the Gateway's spec.tls.backend.clientCertificateRef.
    client_certificate: TlsCertificate | None = None
    parameters: TlsParameters | None = None
    # When `trusted_ca`'s first CA to expire does (Unix seconds), read when it was checked.
    ca_not_after: float = 0.0

    def __post_init__(self) -> None:
        if self.sni is not None and not self.subject_alt_names:
            raise ValueError("UpstreamTls with an explicit SNI needs the names to verify")


@dataclass(frozen=True, slots=True)
class DnsSettings:
    """Per-cluster DNS behaviour (Service annotations). None: the translation's default."""

    lookup_family: LookupFamily | None = None
    refresh_s: float | None = None
    respect_ttl: bool | None = None
    failure_base_s: float | None = None  # failure refresh backoff; None: the refresh rate
    failure_max_s: float | None = None
    jitter_s: float | None = None
    # The shortest interval between resolutions, however short the record's TTL.
    min_refresh_s: float | None = None
    resolvers: tuple[tuple[str, int], ...] = ()  # (ip, port); (): Envoy's bootstrap resolver
    logical: bool = False  # LOGICAL_DNS: one host, the first address; else STRICT_DNS
    # How the one host of a logical cluster races its addresses (Happy Eyeballs): the family
    # tried first, and how many of its addresses before one of the other; None: Envoy's own
    # (the family of the first address, one at a time).
    happy_eyeballs: HappyEyeballs | None = None


@dataclass(frozen=True, slots=True)
class HappyEyeballs:
    """Envoy's UpstreamConnectionOptions.HappyEyeballsConfig."""

    first_family: AddressFamily | None = None  # None: the first address's family
    first_family_count: int | None = None  # None: 1


DEFAULT_DNS_SETTINGS = DnsSettings()

# The family used when neither the Service nor the server configuration names one: Envoy's
# own default, so names dragoman checks and names Envoy resolves pick addresses alike.
DEFAULT_LOOKUP_FAMILY: Final = "V4_PREFERRED"


@dataclass(frozen=True, slots=True)
class ClusterPolicy:
    """The BackendPolicy a cluster's Service accepted, as the cluster carries it: its spec
    alone (a change of the policy's metadata changes no cluster), and the Host its HTTP
    health checks send (the external name of an ExternalName, never an address)."""

    policy: ObjectKey
    active_health_check: ActiveHealthCheck | None = None
    passive_health_check: PassiveHealthCheck | None = None
    panic_threshold: int | None = None
    circuit_breaker: CircuitBreaker | None = None
    connect_timeout_s: float | None = None
    connection_idle_timeout_s: float | None = None
    max_connection_duration_s: float | None = None
    tcp_keepalive: TcpKeepalive | None = None
    http2_keepalive: Http2Keepalive | None = None
    load_balancer: LoadBalancer | None = None
    health_check_host: str = ""

    @property
    def consistent_hash(self) -> LoadBalancer | None:
        """The load balancer when it hashes requests (the routes compute the hash)."""
        balancer = self.load_balancer
        return balancer if balancer is not None and balancer.hash_type is not None else None


@dataclass(frozen=True, slots=True)
class StatefulSession:
    """An XBackendTrafficPolicy's sessionPersistence as Envoy serves it (stateful_session):
    a cookie (or a request header) that names the endpoint a client keeps."""

    header: bool  # True: a header the client sends back; False: a cookie Envoy sets
    name: str
    cookie_ttl_s: float | None = None  # a Permanent cookie's Max-Age; None: a session cookie


@dataclass(frozen=True, slots=True)
class ClusterTraffic:
    """The XBackendTrafficPolicy a cluster's target (a Service or an XBackend) accepted, as
    the cluster carries it: what Envoy serves of its spec alone."""

    policy: ObjectKey
    retry_budget: RetryBudget | None = None
    session: StatefulSession | None = None


@dataclass(frozen=True, slots=True)
class EdsCluster:
    """A pod-backed Service port; endpoints arrive separately through EDS."""

    name: str
    service: ObjectKey
    port: int  # the Service port
    # The ServicePort's targetPort (number or name) and name, for matching EndpointSlice ports.
    target_port: int | str
    port_name: str = ""
    protocol: UpstreamProtocol = (
        HTTP1  # HTTP1, H2C, H2, H1, TCP or UDP; part of the name when not HTTP1
    )
    tls: UpstreamTls | None = None  # a BackendTLSPolicy's; None: cleartext
    # sessionAffinity ClientIP: a consistent hash of the client's address picks the endpoint.
    client_ip_affinity: bool = False
    policy: ClusterPolicy | None = None  # its Service's BackendPolicy
    traffic: ClusterTraffic | None = None  # its Service's XBackendTrafficPolicy

    # Every cluster says whether Envoy takes its endpoints over EDS (see DnsCluster's).
    served_over_eds: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class DnsCluster:
    """An ExternalName Service port: Envoy resolves `hostname` itself (STRICT_DNS); or, when
    `checked`, dragoman does (the DNS check) and serves the addresses it accepted as the
    cluster's endpoints over EDS, so a DNS answer nobody checked is never connected to."""

    name: str
    service: ObjectKey
    hostname: str
    port: int
    protocol: UpstreamProtocol = (
        HTTP1  # HTTP1, H2C, H2, H1, TCP or UDP; part of the name when not HTTP1
    )
    tls: UpstreamTls | None = None
    dns: DnsSettings = DEFAULT_DNS_SETTINGS
    checked: bool = False
    client_ip_affinity: bool = False  # as EdsCluster's
    # The Service's spec.externalIPs that passed the address rules: the cluster's endpoints
    # (over EDS, the name kept as their hostname), and nothing is resolved.
    addresses: tuple[str, ...] = ()
    policy: ClusterPolicy | None = None  # its Service's BackendPolicy
    traffic: ClusterTraffic | None = None  # its Service's (or XBackend's) XBackendTrafficPolicy

    @property
    def served_over_eds(self) -> bool:
        """Whether Envoy takes the cluster's endpoints over EDS, as the addresses dragoman
        serves (the DNS check's, or the Service's spec.externalIPs), never resolving the name
        itself; else the cluster resolves `hostname` (STRICT_DNS or LOGICAL_DNS). The one
        answer to "is this cluster served over EDS?" with EdsCluster's (always) and
        AggregateCluster's (never: its children are, each as it says)."""
        return self.checked or bool(self.addresses)


@dataclass(frozen=True, slots=True)
class AggregateCluster:
    """Failover between Services, in order (an Envoy aggregate cluster: its children's hosts
    as priorities): Envoy sends to the first child while it has healthy hosts, to the next
    when it has none, and back when it recovers. In-cluster first (an ExternalName's
    `dragoman.dev/prefer-service`) is the pods, then the external name; a BackendPolicy's
    `failover` is the Service itself, then the Services it names."""

    name: str
    service: ObjectKey  # the Service that asked for it
    children: tuple[EdsCluster | DnsCluster, ...]  # at least two, in order
    protocol: UpstreamProtocol = HTTP1

    # An aggregate has no endpoints of its own: its children are served each as it says.
    served_over_eds: ClassVar[bool] = False


Cluster = EdsCluster | DnsCluster | AggregateCluster


def hash_policy_of(cluster: Cluster) -> LoadBalancer | None:
    """The consistent hash a BackendPolicy asks routes to the cluster to compute."""
    if isinstance(cluster, AggregateCluster):
        hashed = (hash_policy_of(child) for child in cluster.children)
        return next((found for found in hashed if found is not None), None)
    return cluster.policy.consistent_hash if cluster.policy is not None else None


def session_of(cluster: Cluster) -> StatefulSession | None:
    """The session persistence an XBackendTrafficPolicy asks routes to the cluster to keep
    (of a failover aggregate, its own Service's)."""
    if isinstance(cluster, AggregateCluster):
        own = (child for child in cluster.children if child.service == cluster.service)
        kept = (session_of(child) for child in own)
        return next((found for found in kept if found is not None), None)
    return cluster.traffic.session if cluster.traffic is not None else None


def has_client_ip_affinity(cluster: Cluster) -> bool:
    """Whether requests to the cluster must carry a hash of the client's address: its
    Service asks for ClientIP affinity, and no BackendPolicy's load balancer replaces it."""
    if isinstance(cluster, AggregateCluster):
        return any(has_client_ip_affinity(child) for child in cluster.children)
    balanced = cluster.policy is not None and cluster.policy.load_balancer is not None
    return cluster.client_ip_affinity and not balanced


@dataclass(frozen=True, slots=True)
class LbEndpoint:
    address: str
    port: int
    # The DNS name the address was checked for (an external name): Envoy's Host rewrite, SNI
    # and certificate checks use it, never the address. "" for a pod.
    hostname: str = ""
    # More addresses of the same host (a logical DNS cluster's checked answer): Envoy races
    # them with the first (Happy Eyeballs), on the same port.
    additional_addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Locality:
    zone: str
    endpoints: tuple[LbEndpoint, ...]
    weight: int = 1  # every locality carries a weight (gRPC clients skip those without)


@dataclass(frozen=True, slots=True)
class LoadAssignment:
    cluster: str
    localities: tuple[Locality, ...] = ()


@dataclass(frozen=True, slots=True)
class HeaderEdits:
    """Header changes, names as written (Envoy compares them case-insensitively)."""

    set: tuple[tuple[str, str], ...] = ()  # replace any value the header has
    add: tuple[tuple[str, str], ...] = ()  # append to the values it has
    remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.add or self.remove)


NO_EDITS = HeaderEdits()


@dataclass(frozen=True, slots=True)
class Backend:
    """One weighted backend of a route. `cluster` None: the reference is invalid (answers 500)."""

    cluster: str | None
    weight: int
    # Filters of this backendRef alone: applied only to requests sent to it.
    request_headers: HeaderEdits = NO_EDITS
    response_headers: HeaderEdits = NO_EDITS
    host_rewrite: str | None = None  # the external name of an ExternalName backend


@dataclass(frozen=True, slots=True)
class ValueMatch:
    """A header or query parameter a request must carry with this value (or regex match)."""

    name: str
    value: str
    regex: bool = False


@dataclass(frozen=True, slots=True)
class RouteMatch:
    path_type: PathMatchType
    path: str
    headers: tuple[ValueMatch, ...] = ()
    query_params: tuple[ValueMatch, ...] = ()
    method: str | None = None
    grpc: bool = False  # only gRPC requests (content-type application/grpc)


@dataclass(frozen=True, slots=True)
class PathRewrite:
    """URLRewrite or RequestRedirect path: ReplaceFullPath, or ReplacePrefixMatch of `prefix`."""

    type: PathRewriteType
    value: str
    prefix: str = ""  # the PathPrefix match being replaced (ReplacePrefixMatch only)


@dataclass(frozen=True, slots=True)
class Mirror:
    """A RequestMirror: a share of requests copied to `cluster`, responses ignored."""

    cluster: str
    numerator: int = 100
    denominator: int = 100
    host_rewrite: str | None = None  # the external name of an ExternalName mirror


@dataclass(frozen=True, slots=True)
class Retry:
    """When a forwarded request is tried again (an HTTPRoute rule's `retry`, GEP-1731):
    after a connection failure, a reset, a per-try timeout, or one of `codes`."""

    attempts: int  # retries after the first attempt
    codes: tuple[int, ...] = ()
    backoff_ms: int | None = None  # the back-off's base interval; None: Envoy's (25 ms)


@dataclass(frozen=True, slots=True)
class Forward:
    backends: tuple[Backend, ...]
    # Rewrite Host to the upstream host's DNS name (set when any backend is external).
    auto_host_rewrite: bool = False
    host_rewrite: str | None = None  # URLRewrite hostname; wins over auto_host_rewrite
    path_rewrite: PathRewrite | None = None
    mirrors: tuple[Mirror, ...] = ()
    # Milliseconds; None: Envoy's default route timeout (15 s), 0: no timeout.
    timeout_ms: int | None = None
    per_try_timeout_ms: int | None = None
    retry: Retry | None = None
    # A GRPCRoute action: a share with no valid backend answers 503 (gRPC UNAVAILABLE), and
    # the client's grpc-timeout header bounds each call.
    grpc: bool = False
    # Hash the downstream client's address (a backend Service with sessionAffinity ClientIP).
    hash_client_ip: bool = False
    # What a backend's BackendPolicy (loadBalancer ConsistentHash) hashes, if any.
    hash_policy: LoadBalancer | None = None
    # The session persistence of a backend's XBackendTrafficPolicy, if any.
    session: StatefulSession | None = None

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster this action sends requests (or mirrored copies) to."""
        named = [backend.cluster for backend in self.backends if backend.cluster is not None]
        return (*named, *(mirror.cluster for mirror in self.mirrors))


@dataclass(frozen=True, slots=True)
class Redirect:
    """A RequestRedirect, resolved for the listener it is served on."""

    status: int = 302
    scheme: str | None = None  # None keeps the request's
    hostname: str | None = None  # None keeps the request's
    path: PathRewrite | None = None  # None keeps the request's
    port: int | None = None  # the filter's port; None derives it (Gateway API rules)
    # The port Envoy writes into Location; None writes none beyond what Host carries.
    location_port: int | None = None


@dataclass(frozen=True, slots=True)
class DirectResponse:
    status: int
    body: str = ""


# What an HTTPS listener answers a request whose Host belongs to another listener than its
# SNI chose (a reused connection, or a client lying): 421 makes clients reconnect.
MISDIRECTED = DirectResponse(status=421, body="misdirected request: Host does not match SNI")


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """An HTTPRoute CORS filter: Envoy answers preflights and adds the response headers.

    `*` in allow_methods or allow_headers stays `*` unless credentials are allowed, where the
    Gateway API forbids answering `*`: then every method is listed instead."""

    allow_origins: tuple[str, ...]  # "*", or origins whose host may start with "*."
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age_s: int = 5
    allow_credentials: bool = False


@dataclass(frozen=True, slots=True)
class OAuth2Grant:
    """How Envoy fetches an OAuth2 access token with the client credentials grant: it POSTs
    to `token_uri` through `cluster` (a cluster of its own, served to the listeners whose
    routes inject the token), the client secret being the credential's SDS value."""

    token_uri: str  # scheme://host/path: the Host header and path of the token request
    cluster: str
    timeout_ms: int
    client_id: str
    scopes: tuple[str, ...] = ()
    retry_interval_ms: int | None = None  # None: Envoy's default (2s)


@dataclass(frozen=True, slots=True)
class InjectedCredential:
    """A CredentialInjector's header, added by Envoy to the requests of the routes that name
    it: `name` names it for SDS (the value travels as a generic secret) and names the HTTP
    filter that adds it."""

    name: str  # "<namespace>/<injector name>"
    header: str
    overwrite: bool
    # The header's whole value; with `oauth2`, the client secret Envoy fetches tokens with.
    # Never part of repr: the credential must not reach logs, tracebacks or test output.
    value: bytes = field(repr=False)
    oauth2: OAuth2Grant | None = None  # None: a static value


@dataclass(frozen=True, slots=True)
class Route:
    match: RouteMatch
    action: Forward | Redirect | DirectResponse
    source: ObjectKey  # the HTTPRoute or GRPCRoute this came from
    rule_index: int = 0
    # Rule-level RequestHeaderModifier and ResponseHeaderModifier filters.
    request_headers: HeaderEdits = NO_EDITS
    response_headers: HeaderEdits = NO_EDITS
    cors: CorsPolicy | None = None  # a rule-level CORS filter
    credentials: tuple[InjectedCredential, ...] = ()  # CredentialInjector ExtensionRefs


# The name of the virtual host that answers any Host (a listener without a hostname).
ANY_HOST = "*"


@dataclass(frozen=True, slots=True)
class VirtualHost:
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]  # in match precedence order
    # What a group asks of every host of a table on each change (whether some route keeps
    # sessions or injects credentials, whether the table can be scoped): found once, when
    # the host is made, since an unchanged host is the same object from build to build.
    keeps_sessions: bool = field(init=False, repr=False, compare=False)
    exact: bool = field(init=False, repr=False, compare=False)  # no wildcard name or domain
    # The credentials its routes inject, each name's first, in the order of the routes.
    credentials: tuple[InjectedCredential, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keeps_sessions = False
        credentials: dict[str, InjectedCredential] = {}
        for route in self.routes:
            action = route.action
            keeps_sessions = keeps_sessions or (
                isinstance(action, Forward) and action.session is not None
            )
            for credential in route.credentials:  # most routes have none
                credentials.setdefault(credential.name, credential)
        exact = "*" not in self.name and not any("*" in domain for domain in self.domains)
        object.__setattr__(self, "keeps_sessions", keeps_sessions)
        object.__setattr__(self, "exact", exact)
        object.__setattr__(self, "credentials", tuple(credentials.values()))


@dataclass(frozen=True, slots=True)
class RouteTable:
    name: str
    virtual_hosts: tuple[VirtualHost, ...]


@dataclass(frozen=True, slots=True)
class HttpListener:
    name: str
    port: int
    route_table: str  # RouteTable.name
    stateful_sessions: bool = False  # some route of its table keeps sessions
    # What the routes of its table inject: one HTTP filter each, enabled by those routes.
    credentials: tuple[InjectedCredential, ...] = ()
    # Its table is served as one scope per virtual host (scoped RDS keyed on the Host, every
    # host exact), not as one RouteConfiguration: its Gateway asked (dragoman.dev/route-tables).
    scoped: bool = False


@dataclass(frozen=True, slots=True)
class TlsCertificate:
    """A checked certificate chain and its private key (PEM), from one Secret."""

    secret: ObjectKey
    certificate_chain: bytes
    # Never part of repr: the key must not reach logs, tracebacks or test output.
    private_key: bytes = field(repr=False)
    # When the chain's first certificate to expire does (Unix seconds), read when the pair
    # was checked: the expiry metric reports it without parsing the chain again.
    not_after: float = 0.0


@dataclass(frozen=True, slots=True)
class ClientValidation:
    """How a TLS-terminating listener validates clients' certificates (a Gateway's
    spec.tls.frontend): against `trusted_ca`, sent to Envoy over SDS as `name`.

    `insecure_fallback` (AllowInsecureFallback): a client without a certificate, or with one
    no CA vouches for, still gets through; otherwise (AllowValidOnly) it is refused."""

    name: str  # the SDS name of the validation context
    trusted_ca: bytes  # PEM CA certificates
    insecure_fallback: bool = False
    # When the bundle's first CA to expire does (Unix seconds), read when it was checked.
    not_after: float = 0.0


@dataclass(frozen=True, slots=True)
class TlsFilterChain:
    """TLS terminated for one Gateway listener hostname (SNI), with its own route table."""

    server_names: tuple[str, ...]  # () for the chain that takes every other SNI, or none
    certificates: tuple[TlsCertificate, ...]
    route_table: str  # RouteTable.name
    client_validation: ClientValidation | None = None  # None: no client certificate asked
    stateful_sessions: bool = False  # some route of its table keeps sessions
    credentials: tuple[InjectedCredential, ...] = ()  # as HttpListener's


@dataclass(frozen=True, slots=True)
class HttpsListener:
    name: str
    port: int
    filter_chains: tuple[TlsFilterChain, ...]  # the chain without server_names comes last


@dataclass(frozen=True, slots=True)
class L4Forward:
    """Where a TCPRoute, TLSRoute or UDPRoute sends a connection (or datagrams): weighted
    backends; a backend whose cluster is None takes its share and closes it."""

    backends: tuple[Backend, ...]
    source: ObjectKey  # the route

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(b.cluster for b in self.backends if b.cluster is not None)


@dataclass(frozen=True, slots=True)
class TcpFilterChain:
    """Connections on a TCP or TLS port whose SNI is one of `server_names` (() any or none),
    proxied whole to `forward`. With `certificates`, TLS is terminated first (TLS listener
    in Terminate mode); without, the client's TLS passes through untouched."""

    name: str
    server_names: tuple[str, ...]
    forward: L4Forward
    certificates: tuple[TlsCertificate, ...] = ()
    client_validation: ClientValidation | None = None  # with certificates only


@dataclass(frozen=True, slots=True)
class TcpListener:
    name: str
    port: int
    filter_chains: tuple[TcpFilterChain, ...]  # the chain without server_names comes last
    # Read the SNI of the ClientHello (TLS listeners): chains match on it.
    inspect_tls: bool = False


@dataclass(frozen=True, slots=True)
class UdpListener:
    name: str
    port: int
    forward: L4Forward


Listener = HttpListener | HttpsListener | TcpListener | UdpListener


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """What one group of Envoys receives: a Gateway's listeners, or every Gateway's."""

    name: str  # "<namespace>/<gateway>" or ALL_GATEWAYS
    listeners: tuple[Listener, ...]
    route_tables: tuple[RouteTable, ...]
    clusters: tuple[str, ...]  # names of the clusters its routes reference, sorted
    # Why ports whose Gateways ask for a route table per hostname keep one table (each on
    # its Gateway's listener): reported in the Gateways' status.
    unscoped: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong with one object, for status and logs."""

    object: ObjectKey
    field: str  # path inside the object, e.g. "spec.rules[0].backendRefs[1]"
    reason: str  # a Gateway API-style reason, e.g. "BackendNotFound"
    message: str
    # The object the field refers to, when it does not exist (for `check` to say which
    # existing name was likely meant).
    missing: ObjectKey | None = None

    def __str__(self) -> str:
        return f"{self.object} {self.field}: {self.message} ({self.reason})"


@dataclass(frozen=True, slots=True)
class ObjectStatus:
    """The `status` stanza dragoman computes for one object, as the API server stores it.

    Conditions carry no `lastTransitionTime`: the core has no clock. Whoever writes the
    status (the Kubernetes status writer, `dragoman status`) stamps it, keeping the time of
    a condition whose status did not change. For route kinds, `status["parents"]` holds only
    the entries whose `controllerName` is dragoman's; a writer must keep other controllers'.
    """

    key: ObjectKey
    api_version: str  # e.g. "gateway.networking.k8s.io/v1"
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ApiListener:
    """One name proxyless gRPC clients dial, and the routes its calls take (in precedence
    order)."""

    name: str  # "<host>:<port>": the Listener's and its RouteConfiguration's name
    host: str
    routes: tuple[Route, ...]


@dataclass(frozen=True, slots=True)
class ServiceTarget:
    """One Service port a proxyless gRPC client can dial, and the cluster every call to it
    goes to."""

    host: str  # "<svc>.<ns>.svc.<cluster domain>", one string for every port of a Service
    port: int
    service: tuple[str, str]  # (namespace, name)
    cluster: Cluster

    @property
    def name(self) -> str:
        """`<host>:<port>`, made when asked: most targets are never dialed."""
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ServiceTargets:
    """Every Service port a proxyless gRPC client can dial (by Service, then port), with the
    clusters they need and their endpoints."""

    targets: tuple[ServiceTarget, ...] = ()
    clusters: Mapping[str, Cluster] = field(default_factory=dict)  # aggregate children too
    load_assignments: Mapping[str, LoadAssignment] = field(default_factory=dict)


NO_SERVICE_TARGETS = ServiceTargets()

_T = TypeVar("_T")


class Deferred(Generic[_T]):
    """A value made when first asked for, then kept (what it was made from let go): for
    what most deployments never read, such as the proxyless Service targets. Equal when the
    values are."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], _T]) -> None:
        self._make: Callable[[], _T] | None = make
        self._value: _T | None = None

    @classmethod
    def of(cls, value: _T) -> Deferred[_T]:
        """A value already made."""
        made = cls(lambda: value)
        made._make, made._value = None, value
        return made

    @property
    def value(self) -> _T:
        make = self._make
        if make is not None:
            self._value = make()
            self._make = None
        return self._value  # type: ignore[return-value]  # made above: _T, not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Deferred) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]  # equal by value, which may be unhashable

    def __repr__(self) -> str:
        return f"Deferred({self._value!r})" if self._make is None else "Deferred(not made yet)"


@dataclass(frozen=True, slots=True)
class Dag:
    groups: Mapping[str, NodeGroup] = field(default_factory=dict)
    clusters: Mapping[str, Cluster] = field(default_factory=dict)
    load_assignments: Mapping[str, LoadAssignment] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    statuses: Mapping[ObjectKey, ObjectStatus] = field(default_factory=dict)
    # External names routes forward to, for the DNS check to resolve (only when it is on).
    dns_hostnames: tuple[str, ...] = ()
    # What proxyless gRPC clients can dial by a Service's name (route hostnames are read
    # from the groups), made when first asked for: most deployments have no such client.
    deferred_targets: Deferred[ServiceTargets] = field(
        default_factory=lambda: Deferred.of(NO_SERVICE_TARGETS)
    )
    # The names whose cluster differs (or came or went) from those of the clusters mapping
    # whose id is given: the previous Dag's (translation holds it, so the id names it alone
    # while it compares). None: not known. How the Dag was made, not what it is.
    changed_clusters: tuple[int, frozenset[str]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def service_targets(self) -> ServiceTargets:
        return self.deferred_targets.value
