"""BackendPolicy (dragoman.dev/v1alpha1): how Envoy treats a Service's hosts: health checks,
outlier detection, circuit breakers, connection timeouts and keep-alives, load balancing.

Field names are Envoy Gateway's BackendTrafficPolicy's. Attached per GEP-713 with
`spec.targetRefs` (Services of the policy's namespace). Durations are seconds, read once at
the source boundary; None: the field is not set (Envoy's, or the documented, default).

A policy whose spec breaks a rule is still read: `problems` names each field and why, and
the build reports it (`Accepted=False`, reason `Invalid`) and serves its targets as if it
had no policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from dragoman.objects.backend_tls import PolicyTargetRef
from dragoman.objects.meta import KindObject, ObjectMeta

ActiveType = Literal["HTTP", "TCP", "GRPC"]
ACTIVE_TYPES: tuple[ActiveType, ...] = get_args(ActiveType)
LoadBalancerType = Literal["RoundRobin", "LeastRequest", "Random", "ConsistentHash"]
LOAD_BALANCER_TYPES: tuple[LoadBalancerType, ...] = get_args(LoadBalancerType)
ConsistentHashType = Literal["SourceIP", "Header", "Cookie"]
CONSISTENT_HASH_TYPES: tuple[ConsistentHashType, ...] = get_args(ConsistentHashType)
PayloadType = Literal["Text", "Binary"]
PAYLOAD_TYPES: tuple[PayloadType, ...] = get_args(PayloadType)


@dataclass(frozen=True, slots=True)
class ActiveHealthCheck:
    """healthCheck.active, with Envoy Gateway's defaults."""

    type: ActiveType
    interval_s: float = 3.0
    timeout_s: float = 1.0
    unhealthy_threshold: int = 3
    healthy_threshold: int = 1
    # http: path is required for HTTP; method "" is GET; statuses default to 200.
    http_path: str = ""
    http_method: str = ""
    http_expected_statuses: tuple[int, ...] = ()
    http_hostname: str = ""  # "": the Service's own name (an ExternalName's external name)
    grpc_service: str = ""
    tcp_send: bytes = b""
    tcp_receive: bytes = b""


@dataclass(frozen=True, slots=True)
class PassiveHealthCheck:
    """healthCheck.passive (outlier detection), with Envoy Gateway's defaults."""

    consecutive_5xx_errors: int = 5
    consecutive_gateway_errors: int = 0  # 0: not counted apart from other 5xx
    consecutive_local_origin_failures: int = 5
    split_external_local_origin_errors: bool = False
    interval_s: float = 3.0
    base_ejection_time_s: float = 30.0
    max_ejection_percent: int = 10
    failure_percentage_threshold: int | None = None  # None: not used


@dataclass(frozen=True, slots=True)
class CircuitBreaker:
    """circuitBreaker; None: Envoy's default (1024 each, 3 parallel retries)."""

    max_connections: int | None = None
    max_pending_requests: int | None = None
    max_parallel_requests: int | None = None
    max_parallel_retries: int | None = None
    max_requests_per_connection: int | None = None  # None: unlimited


@dataclass(frozen=True, slots=True)
class TcpKeepalive:
    probes: int | None = None
    idle_time_s: float | None = None
    interval_s: float | None = None


@dataclass(frozen=True, slots=True)
class Http2Keepalive:
    interval_s: float
    timeout_s: float


@dataclass(frozen=True, slots=True)
class LoadBalancer:
    type: LoadBalancerType
    hash_type: ConsistentHashType | None = None  # ConsistentHash only
    hash_header: str = ""  # type Header: the request header hashed
    hash_cookie: str = ""  # type Cookie: the cookie hashed (made when absent)
    hash_cookie_ttl_s: float | None = None  # a made cookie's lifetime; None: a session cookie
    slow_start_window_s: float | None = None


@dataclass(frozen=True, slots=True)
class FailoverRef:
    """A failover entry: a Service (in `namespace`, the policy's unless given)."""

    name: str
    namespace: str


@dataclass(frozen=True, slots=True)
class BackendPolicy(KindObject):
    kind: ClassVar[str] = "BackendPolicy"

    meta: ObjectMeta
    target_refs: tuple[PolicyTargetRef, ...] = ()
    active_health_check: ActiveHealthCheck | None = None
    passive_health_check: PassiveHealthCheck | None = None
    panic_threshold: int | None = None  # percent; None: Envoy's 50
    circuit_breaker: CircuitBreaker | None = None
    connect_timeout_s: float | None = None
    connection_idle_timeout_s: float | None = None
    max_connection_duration_s: float | None = None
    tcp_keepalive: TcpKeepalive | None = None
    http2_keepalive: Http2Keepalive | None = None
    load_balancer: LoadBalancer | None = None
    # The Services that take the traffic, in order, while the target has no healthy host.
    failover: tuple[FailoverRef, ...] = ()
    # (field path, why) for every rule the spec breaks: the policy is not applied.
    problems: tuple[tuple[str, str], ...] = ()
