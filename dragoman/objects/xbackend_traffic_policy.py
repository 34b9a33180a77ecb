"""XBackendTrafficPolicy (gateway.networking.x-k8s.io/v1alpha1, GEP-3388): a retry budget and
session persistence (GEP-1619) for the traffic to a Service or an XBackend.

Attached per GEP-713 with `spec.targetRefs`. Durations are seconds, read once at the source
boundary. A policy whose spec breaks a rule is still read: `problems` names each field and
why, and the build reports it (`Accepted=False`, reason `Invalid`) and serves its targets as
if it had no policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from dragoman.objects.backend_tls import PolicyTargetRef
from dragoman.objects.meta import KindObject, ObjectMeta

SessionType = Literal["Cookie", "Header"]
SESSION_TYPES: tuple[SessionType, ...] = get_args(SessionType)
LifetimeType = Literal["Permanent", "Session"]
LIFETIME_TYPES: tuple[LifetimeType, ...] = get_args(LifetimeType)
# The session's name when `sessionName` is not given (implementation-specific per GEP-1619).
DEFAULT_SESSION_COOKIE = "dragoman-session"
DEFAULT_SESSION_HEADER = "x-dragoman-session"


@dataclass(frozen=True, slots=True)
class RetryBudget:
    """retryConstraint, with the CRD's defaults (20% over 10s, at least 10 per 1s)."""

    percent: int = 20
    interval_s: float = 10.0
    min_retry_count: int = 10
    min_retry_interval_s: float = 1.0


@dataclass(frozen=True, slots=True)
class SessionPersistence:
    """sessionPersistence: a cookie (or a header) that names the endpoint a client keeps."""

    type: SessionType = "Cookie"
    session_name: str = DEFAULT_SESSION_COOKIE
    absolute_timeout_s: float | None = None
    # GEP-1619's idleTimeout (HTTPRoute's; the v1alpha1 CRD does not list it): read so that
    # a manifest giving it is told Envoy cannot honour it, not refused as a typo.
    idle_timeout_s: float | None = None
    lifetime_type: LifetimeType = "Session"


@dataclass(frozen=True, slots=True)
class XBackendTrafficPolicy(KindObject):
    kind: ClassVar[str] = "XBackendTrafficPolicy"

    meta: ObjectMeta
    target_refs: tuple[PolicyTargetRef, ...] = ()
    retry_budget: RetryBudget | None = None
    session_persistence: SessionPersistence | None = None
    # (field path, why) for every rule the spec breaks: the policy is not applied.
    problems: tuple[tuple[str, str], ...] = ()
