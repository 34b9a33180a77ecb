"""XBackendTrafficPolicy (gateway.networking.x-k8s.io/v1alpha1) from decoded manifests,
validated as its CRD validates it (its CEL rules included), and as Envoy would: nothing read
here can make Envoy reject a Cluster or a Route.

A spec that breaks a rule is not a parse error: its problems travel on the object (each with
its field path), so the policy's status says `Invalid` and names the field, and its targets
are served as if it had no policy. Only the metadata decides whether it is read.
"""

from __future__ import annotations

from collections.abc import Mapping

from dragoman.objects import ObjectMeta
from dragoman.objects.backend_tls import PolicyTargetRef
from dragoman.objects.xbackend import XBACKEND_GROUP
from dragoman.objects.xbackend_traffic_policy import (
    DEFAULT_SESSION_COOKIE,
    DEFAULT_SESSION_HEADER,
    LIFETIME_TYPES,
    SESSION_TYPES,
    RetryBudget,
    SessionPersistence,
    XBackendTrafficPolicy,
)
from dragoman.sources.errors import FieldProblem
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import DNS1123_SUBDOMAIN
from dragoman.sources.parsers.backend_policy import (
    COOKIE_NAME,
    HEADER_NAME,
    MAX_TARGET_REFS,
    FieldTree,
    duration,
    unknown_fields,
)

KIND = "XBackendTrafficPolicy"
# The kinds a policy may target: Services, and XBackends (GEP-4894).
TARGET_KINDS = (("", "Service"), (XBACKEND_GROUP, "XBackend"))
MAX_SESSION_NAME = 128
HOUR_S = 3600.0
# A session's absolute timeout becomes a cookie's Max-Age: at most a year, at least 1s.
MAX_SESSION_TIMEOUT_S = 365 * 86400.0
_INTERVAL: FieldTree = {"interval": {}}
SPEC_FIELDS: FieldTree = {
    "targetRefs": {"group": {}, "kind": {}, "name": {}},
    "retryConstraint": {
        "budget": {"percent": {}, **_INTERVAL},
        "minRetryRate": {"count": {}, **_INTERVAL},
    },
    "sessionPersistence": {
        "type": {},
        "sessionName": {},
        "absoluteTimeout": {},
        "idleTimeout": {},
        "cookieConfig": {"lifetimeType": {}},
    },
}


def parse_xbackend_traffic_policy(root: Node, meta: ObjectMeta) -> XBackendTrafficPolicy:
    problems: list[FieldProblem] = []
    data = root.raw("spec")
    if data is None:
        return XBackendTrafficPolicy(meta=meta, problems=(("spec", "is required"),))
    if not isinstance(data, Mapping):
        problem = ("spec", f"expected a mapping, got {describe(data)}")
        return XBackendTrafficPolicy(meta=meta, problems=(problem,))
    problems.extend(unknown_fields(data, SPEC_FIELDS, "spec", KIND))
    spec = Node(data, "spec", problems)
    nodes = spec.mappings("targetRefs", required=True, min_items=1, max_items=MAX_TARGET_REFS)
    targets = tuple(_target_ref(node) for node in nodes or [])
    if len(set(targets)) < len(targets):
        spec.report(spec.at("targetRefs"), "must not name a target twice")
    policy = XBackendTrafficPolicy(
        meta=meta,
        target_refs=targets,
        retry_budget=_retry_budget(spec.mapping("retryConstraint")),
        session_persistence=_session(spec.mapping("sessionPersistence")),
    )
    if not problems:
        return policy
    return XBackendTrafficPolicy(meta=meta, target_refs=targets, problems=tuple(problems))


def _target_ref(node: Node) -> PolicyTargetRef:
    group = node.string("group")
    kind = node.string("kind", required=True)
    name = node.string("name", required=True, format=DNS1123_SUBDOMAIN)
    if (group, kind) not in TARGET_KINDS:
        node.report(
            node.at("kind"),
            f'must be a Service (group "", kind Service) or an XBackend (group {XBACKEND_GROUP}'
            f", kind XBackend), got group {describe(group)} kind {describe(kind)}",
        )
    return PolicyTargetRef(name=name, group=group, kind=kind)


def _retry_budget(node: Node | None) -> RetryBudget | None:
    if node is None:
        return None
    defaults = RetryBudget()
    budget, rate = node.mapping("budget"), node.mapping("minRetryRate")
    percent = interval = count = rate_interval = None
    if budget is not None:
        percent = budget.optional_integer("percent", minimum=0, maximum=100)
        interval = duration(budget, "interval", bounds=(1.0, HOUR_S, "from 1s to 1h"))
    if rate is not None:
        count = rate.optional_integer("count", minimum=1, maximum=1_000_000)
        rate_interval = duration(
            rate, "interval", bounds=(0.001, HOUR_S, "above 0s and at most 1h")
        )
    return RetryBudget(
        percent=defaults.percent if percent is None else percent,
        interval_s=interval or defaults.interval_s,
        min_retry_count=count or defaults.min_retry_count,
        min_retry_interval_s=rate_interval or defaults.min_retry_interval_s,
    )


def _session(node: Node | None) -> SessionPersistence | None:
    if node is None:
        return None
    kind = node.choice("type", SESSION_TYPES, default="Cookie")
    name_format = COOKIE_NAME if kind == "Cookie" else HEADER_NAME
    name = node.optional_string("sessionName", format=name_format, max_length=MAX_SESSION_NAME)
    bounds = "from 1s to 365 days"
    absolute = duration(node, "absoluteTimeout", bounds=(1.0, MAX_SESSION_TIMEOUT_S, bounds))
    idle = duration(node, "idleTimeout", bounds=(1.0, MAX_SESSION_TIMEOUT_S, bounds))
    cookie = node.mapping("cookieConfig")
    lifetime = cookie.choice("lifetimeType", LIFETIME_TYPES, default="Session") if cookie else None
    if cookie is not None and kind != "Cookie":
        node.report(node.at("cookieConfig"), "can only be set with type Cookie")
    if lifetime == "Permanent" and not node.has("absoluteTimeout"):
        node.report(
            node.at("absoluteTimeout"), "must be specified when cookie lifetimeType is Permanent"
        )
    default_name = DEFAULT_SESSION_COOKIE if kind == "Cookie" else DEFAULT_SESSION_HEADER
    return SessionPersistence(
        type=kind,
        # Header names are compared lowercase (as Envoy keeps them).
        session_name=(name.lower() if kind == "Header" else name) if name else default_name,
        absolute_timeout_s=absolute,
        idle_timeout_s=idle,
        lifetime_type=lifetime or "Session",
    )
