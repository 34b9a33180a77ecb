"""BackendTLSPolicies: which one applies to a Service port, the TLS it asks for, and its
conditions (Accepted, ResolvedRefs) as the Gateway API defines them.

- A policy targets a Service (group "", kind Service), or one port of it by `sectionName`
  (the port's name). Of two policies on the same target the older wins (creation time, then
  namespace/name); the other is not Accepted (reason Conflicted). A port takes the winner
  naming it before the winner naming the whole Service.
- CA certificates come from ConfigMaps or Secrets (key `ca.crt`) in the policy's namespace,
  or `wellKnownCACertificates: System` (the system bundle). A policy whose CA references are
  all invalid is not Accepted (NoValidCACertificate) and requests to its targets fail (500).
- The SNI is `validation.hostname`; the certificate must carry one of `subjectAltNames`, or
  that hostname when none is given.
- `options` of dragoman's (backend_tls_options.py): a client certificate presented to the
  targets, TLS versions, cipher suites and groups. One that cannot be used (an unknown
  dragoman.dev/ key, a value Envoy would refuse, a missing Secret) refuses the policy (Invalid,
  naming the key): requests to its targets fail rather than go without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from dragoman.dag.backend_tls_options import (
    INVALID_CLIENT_CERTIFICATE_REF,
    NO_OPTIONS,
    OptionRefusal,
    judge_options,
)
from dragoman.dag.conditions import Condition, condition
from dragoman.dag.model import SubjectAltNameMatch, UpstreamTls
from dragoman.objects import BackendTLSPolicy, ConfigMap, ObjectKey, Secret
from dragoman.objects.backend_tls import (
    SAN_URI,
    WELL_KNOWN_SYSTEM,
    CACertificateRef,
    PolicyTargetRef,
    SubjectAltName,
)
from dragoman.security.pem import holds_private_key
from dragoman.store import NamespacedName

CA_CERT_KEY = "ca.crt"
CA_KINDS = ("ConfigMap", "Secret")

# Policy condition reasons (gateway.networking.k8s.io/v1 PolicyConditionReason and the
# BackendTLSPolicy ones).
ACCEPTED = "Accepted"
CONFLICTED = "Conflicted"
INVALID = "Invalid"
NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
TARGET_NOT_FOUND = "TargetNotFound"
RESOLVED_REFS = "ResolvedRefs"
INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
INVALID_KIND = "InvalidKind"

# Target key: (namespace, Service name, port name or None for every port).
TargetKey = tuple[str, str, str | None]


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """One policy judged on its own: the TLS it configures (None when it cannot be used) and
    its ResolvedRefs outcome."""

    policy: BackendTLSPolicy
    tls: UpstreamTls | None
    # Why the policy cannot be used at all (Accepted=False): (reason, message).
    invalid: tuple[str, str] | None = None
    # ResolvedRefs=False: (reason, message), even when some references were usable.
    unresolved: tuple[str, str] | None = None

    @property
    def key(self) -> ObjectKey:
        return self.policy.key


class BackendTlsPolicies:
    """Every BackendTLSPolicy, judged and indexed by target."""

    __slots__ = ("_targets", "_verdicts", "_winners")

    def __init__(
        self,
        policies: Iterable[BackendTLSPolicy] = (),
        config_maps: Mapping[NamespacedName, ConfigMap] | None = None,
        secrets: Mapping[NamespacedName, Secret] | None = None,
    ) -> None:
        config_maps = config_maps or {}
        secrets = secrets or {}
        ordered = sorted(policies, key=_precedence)
        self._verdicts = {p.key: judge_policy(p, config_maps, secrets) for p in ordered}
        # Target -> the policy that wins it (the first in precedence order).
        self._winners: dict[TargetKey, ObjectKey] = {}
        # Service (namespace, name) -> the policies naming it, in precedence order.
        self._targets: dict[NamespacedName, list[ObjectKey]] = {}
        for policy in ordered:
            for target in _service_targets(policy):
                self._winners.setdefault(target, policy.key)
                named = self._targets.setdefault((target[0], target[1]), [])
                if policy.key not in named:
                    named.append(policy.key)

    def __bool__(self) -> bool:
        return bool(self._verdicts)

    def for_port(self, namespace: str, service: str, port_name: str) -> PolicyVerdict | None:
        """The policy that applies to one Service port, if any."""
        winner = None
        if port_name:
            winner = self._winners.get((namespace, service, port_name))
        if winner is None:
            winner = self._winners.get((namespace, service, None))
        return self._verdicts[winner] if winner is not None else None

    def targeting(self, namespace: str, service: str) -> tuple[ObjectKey, ...]:
        return tuple(self._targets.get((namespace, service), ()))

    def conditions(
        self, key: ObjectKey, service_ports: Mapping[NamespacedName, frozenset[str]]
    ) -> list[Condition]:
        """Accepted and ResolvedRefs of one policy. `service_ports`: the port names of each
        existing Service, to tell a sectionName that names no port."""
        verdict = self._verdicts[key]
        policy = verdict.policy
        generation = policy.meta.generation
        accepted = self._accepted(verdict, service_ports, generation)
        if verdict.unresolved is not None:
            reason, message = verdict.unresolved
            resolved = condition(RESOLVED_REFS, False, reason, message, generation)
        else:
            resolved = condition(
                RESOLVED_REFS, True, RESOLVED_REFS, "all references resolved", generation
            )
        return [accepted, resolved]

    def _accepted(
        self,
        verdict: PolicyVerdict,
        service_ports: Mapping[NamespacedName, frozenset[str]],
        generation: int,
    ) -> Condition:
        policy = verdict.policy
        if verdict.invalid is not None:
            reason, message = verdict.invalid
            return condition(ACCEPTED, False, reason, message, generation)
        targets = _service_targets(policy)
        missing = [t for t in targets if not _target_exists(t, service_ports)]
        if targets and len(missing) == len(targets):
            return condition(
                ACCEPTED,
                False,
                TARGET_NOT_FOUND,
                "; ".join(_missing_message(t, service_ports) for t in missing),
                generation,
            )
        lost = [(t, self._winners[t]) for t in targets if self._winners[t] != policy.key]
        if targets and len(lost) == len(targets):
            winner = lost[0][1]
            return condition(
                ACCEPTED,
                False,
                CONFLICTED,
                f"{_describe_target(lost[0][0])} is already targeted by the older "
                f"BackendTLSPolicy {winner.namespace}/{winner.name}, which takes precedence",
                generation,
            )
        notes = [_missing_message(t, service_ports) for t in missing]
        notes += [
            f"{_describe_target(t)} is taken by BackendTLSPolicy {w.namespace}/{w.name}"
            for t, w in lost
        ]
        suffix = f" (not applied: {'; '.join(notes)})" if notes else ""
        return condition(ACCEPTED, True, ACCEPTED, f"policy is accepted{suffix}", generation)


def judge_policy(
    policy: BackendTLSPolicy,
    config_maps: Mapping[NamespacedName, ConfigMap],
    secrets: Mapping[NamespacedName, Secret],
) -> PolicyVerdict:
    tls, invalid, unresolved = judge_validation(
        ValidationSpec(
            policy.meta.namespace,
            policy.key,
            policy.hostname,
            policy.ca_certificate_refs,
            policy.well_known_ca_certificates,
            policy.subject_alt_names,
        ),
        config_maps,
        secrets,
    )
    options = judge_options(policy, secrets)
    if isinstance(options, OptionRefusal):
        if options.unresolved and unresolved is None:
            unresolved = (INVALID_CLIENT_CERTIFICATE_REF, options.message)
        # Never served without what the options ask for (a certificate, a TLS version).
        if invalid is None:
            invalid = (INVALID, options.message)
        else:
            invalid = (invalid[0], f"{invalid[1]}; {options.message}")
        return PolicyVerdict(policy, None, invalid=invalid, unresolved=unresolved)
    if tls is not None and options is not NO_OPTIONS:
        tls = dataclasses.replace(
            tls, client_certificate=options.client_certificate, parameters=options.parameters
        )
    return PolicyVerdict(policy, tls, invalid=invalid, unresolved=unresolved)


@dataclass(frozen=True, slots=True)
class ValidationSpec:
    """A `validation` block (a BackendTLSPolicy's, or an XBackend's spec.tls.validation) and
    whose it is: its references are in `namespace`, its fields under `field`."""

    namespace: str
    owner: ObjectKey
    hostname: str
    ca_certificate_refs: tuple[CACertificateRef, ...]
    well_known_ca_certificates: str | None
    subject_alt_names: tuple[SubjectAltName, ...]
    field: str = "validation"


def judge_validation(
    spec: ValidationSpec,
    config_maps: Mapping[NamespacedName, ConfigMap],
    secrets: Mapping[NamespacedName, Secret],
) -> tuple[UpstreamTls | None, tuple[str, str] | None, tuple[str, str] | None]:
    """The TLS a validation block asks for (None when it cannot be used), why it cannot be
    used at all (reason, message), and why some reference does not resolve."""
    sans = tuple(
        SubjectAltNameMatch("URI" if san.type == SAN_URI else "DNS", san.value)
        for san in spec.subject_alt_names
    ) or (SubjectAltNameMatch("DNS", spec.hostname),)
    well_known = spec.well_known_ca_certificates
    if well_known is not None:
        if well_known != WELL_KNOWN_SYSTEM:
            message = (
                f"{spec.field}.wellKnownCACertificates {well_known!r} is not supported; "
                f"dragoman supports {WELL_KNOWN_SYSTEM!r} (the system CA bundle)"
            )
            return None, (INVALID, message), None
        return UpstreamTls(spec.hostname, sans, None, spec.owner), None, None
    bundles: list[bytes] = []
    problems: list[tuple[str, str]] = []
    for index, ref in enumerate(spec.ca_certificate_refs):
        found = ca_bundle(spec.namespace, ref.group, ref.kind, ref.name, config_maps, secrets)
        if isinstance(found, bytes):
            bundles.append(found)
        else:
            reason, message = found
            problems.append((reason, f"{spec.field}.caCertificateRefs[{index}]: {message}"))
    unresolved = None
    if problems:
        unresolved = (problems[0][0], "; ".join(message for _, message in problems))
    if not bundles:
        message = unresolved[1] if unresolved else "no CA certificate is referenced"
        return None, (NO_VALID_CA_CERTIFICATE, f"no valid CA certificate: {message}"), unresolved
    trusted = b"".join(bundle if bundle.endswith(b"\n") else bundle + b"\n" for bundle in bundles)
    # Each bundle's expiry was read by its check (cached there): kept for the expiry metric.
    expires = min(bundle_not_after(bundle) or 0.0 for bundle in bundles)
    tls = UpstreamTls(spec.hostname, sans, trusted, spec.owner, ca_not_after=expires)
    return tls, None, unresolved


def ca_bundle(
    namespace: str,
    group: str,
    kind: str,
    name: str,
    config_maps: Mapping[NamespacedName, ConfigMap],
    secrets: Mapping[NamespacedName, Secret],
) -> bytes | tuple[str, str]:
    """The PEM bundle a caCertificateRef names, or (reason, message) saying why not.

    Shared by BackendTLSPolicies and Gateways' client certificate validation. A `ca.crt`
    holding a private key is refused whole: a trust bundle is served to Envoy, and a key in
    it would travel with it (the message names the key, never shows it)."""
    if group != "" or kind not in CA_KINDS:
        shown = f"{group}/{kind}" if group else kind
        return INVALID_KIND, f"kind {shown!r} is not supported; use a core ConfigMap or Secret"
    data: bytes | None
    if kind == "ConfigMap":
        config_map = config_maps.get((namespace, name))
        if config_map is None:
            return INVALID_CA_CERTIFICATE_REF, f"ConfigMap {namespace}/{name} not found"
        text = config_map.data.get(CA_CERT_KEY)
        data = text.encode() if text is not None else None
    else:
        secret = secrets.get((namespace, name))
        if secret is None:
            return INVALID_CA_CERTIFICATE_REF, f"Secret {namespace}/{name} not found"
        data = secret.data.get(CA_CERT_KEY)
    if not data:
        return (
            INVALID_CA_CERTIFICATE_REF,
            f"{kind} {namespace}/{name} has no {CA_CERT_KEY!r} key",
        )
    if holds_private_key(data):
        return (
            INVALID_CA_CERTIFICATE_REF,
            f"{kind} {namespace}/{name} key {CA_CERT_KEY!r} holds a private key besides "
            "certificates; refused (a CA bundle is served to Envoy, a key must never be)",
        )
    if bundle_not_after(data) is None:
        return (
            INVALID_CA_CERTIFICATE_REF,
            f"{kind} {namespace}/{name} key {CA_CERT_KEY!r} is not PEM CA certificates",
        )
    return data


# Pure and deterministic; parsing certificates is the slow part of judging a policy.
@lru_cache(maxsize=512)
def bundle_not_after(data: bytes) -> float | None:
    """When the first certificate of the PEM bundle `data` expires (Unix seconds); None when
    `data` is not PEM certificates. Read with the check, kept for the expiry metric."""
    from cryptography import x509  # on first use: a store without policies never needs it

    try:
        certificates = x509.load_pem_x509_certificates(data)
    except ValueError:
        return None
    return min((c.not_valid_after_utc.timestamp() for c in certificates), default=None)


def _precedence(policy: BackendTLSPolicy) -> tuple[str, str, str]:
    # The Gateway API's order: the older first, then namespace/name alphabetically.
    return policy.meta.creation_timestamp, policy.meta.namespace, policy.meta.name


def _service_targets(policy: BackendTLSPolicy) -> list[TargetKey]:
    return [
        (policy.meta.namespace, ref.name, ref.section_name)
        for ref in policy.target_refs
        if _is_service(ref)
    ]


def _is_service(ref: PolicyTargetRef) -> bool:
    return ref.group == "" and ref.kind == "Service"


def _target_exists(
    target: TargetKey, service_ports: Mapping[NamespacedName, frozenset[str]]
) -> bool:
    ports = service_ports.get((target[0], target[1]))
    return ports is not None and (target[2] is None or target[2] in ports)


def _missing_message(
    target: TargetKey, service_ports: Mapping[NamespacedName, frozenset[str]]
) -> str:
    namespace, name, section = target
    if (namespace, name) not in service_ports:
        return f"Service {namespace}/{name} not found"
    return f"Service {namespace}/{name} has no port named {section!r}"


def _describe_target(target: TargetKey) -> str:
    namespace, name, section = target
    port = f" port {section!r}" if section else ""
    return f"Service {namespace}/{name}{port}"
