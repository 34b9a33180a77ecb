"""BackendPolicy (dragoman.dev/v1alpha1) from decoded manifests, validated as its CRD
(deploy/crds) validates it, and as Envoy would: nothing read here can make Envoy reject a
Cluster.

A spec that breaks a rule is not a parse error: its problems travel on the object (each
with its field path), so the policy's status says `Invalid` and names the field, and its
targets are served as if it had no policy. Only the metadata decides whether it is read.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import TypeAlias

from dragoman.objects import ObjectMeta
from dragoman.objects.backend_policy import (
    ACTIVE_TYPES,
    CONSISTENT_HASH_TYPES,
    LOAD_BALANCER_TYPES,
    PAYLOAD_TYPES,
    ActiveHealthCheck,
    BackendPolicy,
    CircuitBreaker,
    FailoverRef,
    Http2Keepalive,
    LoadBalancer,
    PassiveHealthCheck,
    TcpKeepalive,
)
from dragoman.objects.backend_tls import PolicyTargetRef
from dragoman.objects.durations import DURATION_EXPECTED, parse_duration
from dragoman.sources.errors import FieldProblem, printable
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN, Format
from dragoman.sources.suggestions import closest

MAX_TARGET_REFS = 16
MAX_FAILOVER = 8
FieldTree: TypeAlias = "dict[str, FieldTree]"
MAX_UINT32 = 2**32 - 1
# Every duration a policy gives lies in [1ms, 24h]: longer is a mistake, and Envoy's timers
# take milliseconds.
MIN_DURATION_S = 0.001
MAX_DURATION_S = 86400.0
MAX_PAYLOAD_BYTES = 1024
MAX_EXPECTED_STATUSES = 32
# Methods Envoy's health checker can send (it refuses CONNECT).
HEALTH_CHECK_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH")
# An HTTP header name (RFC 9110 token, lowercase as Envoy compares it) and a cookie name.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
HEADER_NAME = Format('an HTTP header name such as "x-user"', lambda v: bool(_TOKEN.fullmatch(v)))
COOKIE_NAME = Format('a cookie name such as "session"', lambda v: bool(_TOKEN.fullmatch(v)))
# A health check's path: an absolute path (and query) of visible ASCII.
HEALTH_PATH = Format(
    'an absolute path such as "/healthz" (visible ASCII, at most 1024 characters)',
    lambda v: len(v) <= 1024 and re.fullmatch(r"/[\x21-\x7e]*", v) is not None,
)
GRPC_SERVICE = Format(
    'a gRPC service name such as "grpc.health.v1.Health" (visible ASCII)',
    lambda v: len(v) <= 256 and re.fullmatch(r"[\x21-\x7e]*", v) is not None,
)


_PAYLOAD: FieldTree = {"type": {}, "text": {}, "binary": {}}
_DURATION_PAIR: FieldTree = {"interval": {}, "timeout": {}}
# Every field of a spec, nested as written (a list's items under the list's name): a field
# not named here is a typo dragoman refuses, as kubectl's strict field validation does.
SPEC_FIELDS: FieldTree = {
    "targetRefs": {"group": {}, "kind": {}, "name": {}, "sectionName": {}},
    "healthCheck": {
        "active": {
            "type": {},
            **_DURATION_PAIR,
            "unhealthyThreshold": {},
            "healthyThreshold": {},
            "http": {"path": {}, "method": {}, "expectedStatuses": {}, "hostname": {}},
            "grpc": {"service": {}},
            "tcp": {"send": _PAYLOAD, "receive": _PAYLOAD},
        },
        "passive": {
            "consecutive5XxErrors": {},
            "consecutiveGatewayErrors": {},
            "consecutiveLocalOriginFailures": {},
            "splitExternalLocalOriginErrors": {},
            "interval": {},
            "baseEjectionTime": {},
            "maxEjectionPercent": {},
            "failurePercentageThreshold": {},
        },
        "panicThreshold": {},
    },
    "circuitBreaker": {
        "maxConnections": {},
        "maxPendingRequests": {},
        "maxParallelRequests": {},
        "maxParallelRetries": {},
        "maxRequestsPerConnection": {},
    },
    "timeout": {
        "tcp": {"connectTimeout": {}},
        "http": {"connectionIdleTimeout": {}, "maxConnectionDuration": {}},
    },
    "tcpKeepalive": {"probes": {}, "idleTime": {}, "interval": {}},
    "http2": {"connectionKeepalive": _DURATION_PAIR},
    "failover": {"group": {}, "kind": {}, "name": {}, "namespace": {}},
    "loadBalancer": {
        "type": {},
        "consistentHash": {
            "type": {},
            "header": {"name": {}},
            "cookie": {"name": {}, "ttl": {}},
        },
        "slowStart": {"window": {}},
    },
}


def unknown_fields(
    data: object, fields: FieldTree, path: str, kind: str = "BackendPolicy"
) -> Iterator[FieldProblem]:
    """A problem for every key of `data` (and of the mappings in it) `fields` does not name."""
    if isinstance(data, list):
        for index, item in enumerate(data):
            yield from unknown_fields(item, fields, f"{path}[{index}]", kind)
        return
    if not isinstance(data, Mapping) or not fields:
        return
    for key, value in data.items():
        where = f"{path}.{key}"
        if key in fields:
            yield from unknown_fields(value, fields[key], where, kind)
            continue
        meant = closest(str(key), fields)
        hint = f"; did you mean {meant}?" if meant else ""
        yield printable(where), f"is not a field of {kind}{hint}"


def parse_backend_policy(root: Node, meta: ObjectMeta) -> BackendPolicy:
    problems: list[FieldProblem] = []
    data = root.raw("spec")
    if data is None:
        return BackendPolicy(meta=meta, problems=(("spec", "is required"),))
    if not isinstance(data, Mapping):
        problem = ("spec", f"expected a mapping, got {describe(data)}")
        return BackendPolicy(meta=meta, problems=(problem,))
    problems.extend(unknown_fields(data, SPEC_FIELDS, "spec"))
    spec = Node(data, "spec", problems)
    nodes = spec.mappings("targetRefs", required=True, min_items=1, max_items=MAX_TARGET_REFS)
    targets = tuple(_target_ref(node) for node in nodes or [])
    health = spec.mapping("healthCheck")
    timeout = spec.mapping("timeout")
    tcp_timeout = timeout.mapping("tcp") if timeout else None
    http_timeout = timeout.mapping("http") if timeout else None
    http2 = spec.mapping("http2")
    keepalive2 = http2.mapping("connectionKeepalive") if http2 else None
    policy = BackendPolicy(
        meta=meta,
        target_refs=targets,
        active_health_check=_active(health.mapping("active")) if health else None,
        passive_health_check=_passive(health.mapping("passive")) if health else None,
        panic_threshold=health.optional_integer("panicThreshold", minimum=0, maximum=100)
        if health
        else None,
        circuit_breaker=_circuit_breaker(spec.mapping("circuitBreaker")),
        connect_timeout_s=duration(tcp_timeout, "connectTimeout") if tcp_timeout else None,
        connection_idle_timeout_s=duration(http_timeout, "connectionIdleTimeout")
        if http_timeout
        else None,
        max_connection_duration_s=duration(http_timeout, "maxConnectionDuration")
        if http_timeout
        else None,
        tcp_keepalive=_tcp_keepalive(spec.mapping("tcpKeepalive")),
        http2_keepalive=_http2_keepalive(keepalive2) if keepalive2 else None,
        load_balancer=_load_balancer(spec.mapping("loadBalancer")),
        failover=_failover(spec, meta.namespace),
    )
    if not problems:
        return policy
    return BackendPolicy(meta=meta, target_refs=targets, problems=tuple(problems))


def duration(
    node: Node,
    key: str,
    *,
    required: bool = False,
    bounds: tuple[float, float, str] = (MIN_DURATION_S, MAX_DURATION_S, "from 1ms to 24h"),
) -> float | None:
    """A GEP-2257 duration in seconds within `bounds` (least, most, and how a message says
    them); None (and a problem) otherwise."""
    text = node.optional_string(key, required=required)
    if text is None:
        return None
    value = parse_duration(text)
    if value is None:
        node.expected(node.at(key), DURATION_EXPECTED, text)
        return None
    least, most, said = bounds
    if not least <= value <= most:
        node.report(node.at(key), f"must be {said}, got {describe(text)}")
        return None
    return value


def _target_ref(node: Node) -> PolicyTargetRef:
    group = node.string("group")
    kind = node.string("kind", required=True)
    name = node.string("name", required=True, format=DNS1123_SUBDOMAIN)
    if (group, kind) != ("", "Service"):
        node.report(
            node.at("kind"),
            f'must be a Service (group "", kind Service), got group {describe(group)} '
            f"kind {describe(kind)}",
        )
    if node.has("sectionName"):
        node.report(node.at("sectionName"), "is not supported: a policy applies to every port")
    return PolicyTargetRef(name=name, group=group, kind=kind)


def _active(node: Node | None) -> ActiveHealthCheck | None:
    if node is None:
        return None
    kind = node.optional_choice("type", ACTIVE_TYPES, required=True)
    common = {
        "interval_s": duration(node, "interval") or 3.0,
        "timeout_s": duration(node, "timeout") or 1.0,
        "unhealthy_threshold": node.integer(
            "unhealthyThreshold", minimum=1, maximum=MAX_UINT32, default=3
        ),
        "healthy_threshold": node.integer(
            "healthyThreshold", minimum=1, maximum=MAX_UINT32, default=1
        ),
    }
    http, grpc, tcp = node.mapping("http"), node.mapping("grpc"), node.mapping("tcp")
    for other, given in (("http", http), ("grpc", grpc), ("tcp", tcp)):
        if given is not None and kind is not None and other != kind.lower():
            node.report(node.at(other), f"must not be set when type is {kind}")
    if kind == "HTTP":
        if http is None:
            node.report(node.at("http"), "is required when type is HTTP")
            return None
        return ActiveHealthCheck(type=kind, **common, **_http_check(http))  # type: ignore[arg-type]  # the keys are fields
    if kind == "GRPC":
        service = grpc.string("service", format=GRPC_SERVICE) if grpc else ""
        return ActiveHealthCheck(type=kind, grpc_service=service, **common)  # type: ignore[arg-type]  # likewise
    if kind == "TCP":
        send = _payload(tcp.mapping("send")) if tcp else b""
        receive = _payload(tcp.mapping("receive")) if tcp else b""
        return ActiveHealthCheck(type=kind, tcp_send=send, tcp_receive=receive, **common)  # type: ignore[arg-type]  # likewise
    return None


def _http_check(node: Node) -> dict[str, object]:
    method = node.string("method", choices=HEALTH_CHECK_METHODS)
    statuses: list[int] = []
    items = node.raw("expectedStatuses")
    if items is not None:
        if not isinstance(items, list) or len(items) > MAX_EXPECTED_STATUSES:
            node.expected(node.at("expectedStatuses"), "a list of at most 32 statuses", items)
        else:
            for index, item in enumerate(items):
                if isinstance(item, int) and not isinstance(item, bool) and 100 <= item <= 599:
                    statuses.append(item)
                else:
                    node.expected(
                        f"{node.at('expectedStatuses')}[{index}]", "a status from 100 to 599", item
                    )
    return {
        "http_path": node.string("path", required=True, format=HEALTH_PATH),
        "http_method": method,
        "http_expected_statuses": tuple(dict.fromkeys(statuses)),
        "http_hostname": node.string("hostname", format=DNS1123_SUBDOMAIN),
    }


def _payload(node: Node | None) -> bytes:
    """A tcp.send or tcp.receive payload: `text`, or `binary` (base64)."""
    if node is None:
        return b""
    kind = node.optional_choice("type", PAYLOAD_TYPES, required=True)
    if kind == "Text":
        text = node.string("text", required=True, min_length=1, max_length=MAX_PAYLOAD_BYTES)
        return text.encode()
    if kind == "Binary":
        encoded = node.string("binary", required=True, min_length=1)
        try:
            value = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            node.expected(node.at("binary"), "base64", encoded)
            return b""
        if len(value) > MAX_PAYLOAD_BYTES:
            node.report(node.at("binary"), f"must be at most {MAX_PAYLOAD_BYTES} bytes")
        return value
    return b""


def _passive(node: Node | None) -> PassiveHealthCheck | None:
    if node is None:
        return None
    defaults = PassiveHealthCheck()
    threshold = node.optional_integer("failurePercentageThreshold", minimum=0, maximum=100)
    return PassiveHealthCheck(
        consecutive_5xx_errors=node.integer(
            "consecutive5XxErrors", minimum=0, maximum=MAX_UINT32, default=5
        ),
        consecutive_gateway_errors=node.integer(
            "consecutiveGatewayErrors", minimum=0, maximum=MAX_UINT32, default=0
        ),
        consecutive_local_origin_failures=node.integer(
            "consecutiveLocalOriginFailures", minimum=0, maximum=MAX_UINT32, default=5
        ),
        split_external_local_origin_errors=node.boolean(
            "splitExternalLocalOriginErrors", default=False
        ),
        interval_s=duration(node, "interval") or defaults.interval_s,
        base_ejection_time_s=duration(node, "baseEjectionTime") or defaults.base_ejection_time_s,
        max_ejection_percent=node.integer("maxEjectionPercent", minimum=0, maximum=100, default=10),
        failure_percentage_threshold=threshold,
    )


def _circuit_breaker(node: Node | None) -> CircuitBreaker | None:
    if node is None:
        return None

    def limit(key: str, minimum: int = 0) -> int | None:
        return node.optional_integer(key, minimum=minimum, maximum=MAX_UINT32)

    return CircuitBreaker(
        max_connections=limit("maxConnections"),
        max_pending_requests=limit("maxPendingRequests"),
        max_parallel_requests=limit("maxParallelRequests"),
        max_parallel_retries=limit("maxParallelRetries"),
        max_requests_per_connection=limit("maxRequestsPerConnection", minimum=1),
    )


def _tcp_keepalive(node: Node | None) -> TcpKeepalive | None:
    if node is None:
        return None
    idle, interval = duration(node, "idleTime"), duration(node, "interval")
    for key, value in (("idleTime", idle), ("interval", interval)):
        if value is not None and value < 1:
            node.report(node.at(key), "must be at least 1s (TCP keep-alive counts whole seconds)")
    return TcpKeepalive(
        probes=node.optional_integer("probes", minimum=1, maximum=MAX_UINT32),
        idle_time_s=idle,
        interval_s=interval,
    )


def _http2_keepalive(node: Node) -> Http2Keepalive | None:
    interval = duration(node, "interval", required=True)
    timeout = duration(node, "timeout", required=True)
    if interval is None or timeout is None:
        return None
    return Http2Keepalive(interval_s=interval, timeout_s=timeout)


def _failover(spec: Node, namespace: str) -> tuple[FailoverRef, ...]:
    nodes = spec.mappings("failover", max_items=MAX_FAILOVER) or []
    found = []
    for node in nodes:
        if (node.string("group"), node.string("kind", default="Service")) != ("", "Service"):
            node.report(node.at("kind"), 'must be a Service (group "", kind Service)')
        name = node.string("name", required=True, format=DNS1035_LABEL)
        found.append(FailoverRef(name, node.string("namespace", format=DNS1123_LABEL) or namespace))
    if len(set(found)) < len(found):
        spec.report(spec.at("failover"), "must not name a Service twice")
    return tuple(found)


def _load_balancer(node: Node | None) -> LoadBalancer | None:
    if node is None:
        return None
    kind = node.optional_choice("type", LOAD_BALANCER_TYPES, required=True)
    consistent = node.mapping("consistentHash")
    slow = node.mapping("slowStart")
    window = duration(slow, "window", required=True) if slow else None
    if kind is None:
        return None
    if kind != "ConsistentHash":
        if consistent is not None:
            node.report(node.at("consistentHash"), "must be set only when type is ConsistentHash")
        if window is not None and kind == "Random":
            node.report(node.at("slowStart"), "applies to RoundRobin and LeastRequest only")
        return LoadBalancer(type=kind, slow_start_window_s=window)
    if slow is not None:
        node.report(node.at("slowStart"), "applies to RoundRobin and LeastRequest only")
    if consistent is None:
        node.report(node.at("consistentHash"), "is required when type is ConsistentHash")
        return None
    hash_type = consistent.optional_choice("type", CONSISTENT_HASH_TYPES, required=True)
    header = consistent.mapping("header", required=hash_type == "Header")
    cookie = consistent.mapping("cookie", required=hash_type == "Cookie")
    for key, given in (("header", header), ("cookie", cookie)):
        if given is not None and hash_type != key.capitalize():
            consistent.report(consistent.at(key), f"must not be set when type is {hash_type}")
    return LoadBalancer(
        type=kind,
        hash_type=hash_type,
        hash_header=header.string("name", required=True, format=HEADER_NAME).lower()
        if header
        else "",
        hash_cookie=cookie.string("name", required=True, format=COOKIE_NAME) if cookie else "",
        hash_cookie_ttl_s=duration(cookie, "ttl") if cookie else None,
    )
