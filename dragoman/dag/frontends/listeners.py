"""Gateways to verdicts on each listener: what it admits, whether it conflicts, which TLS
certificates it terminates with, and so whether dragoman can serve (program) it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from dragoman.dag.context import BuildContext
from dragoman.dag.frontends.certificates import tls_certificate
from dragoman.dag.frontends.gateway_classes import ClassVerdict, class_decision, class_verdicts
from dragoman.dag.model import Problem, TlsCertificate
from dragoman.dag.routes.reference_grants import (
    Referrer,
    Target,
    not_permitted_message,
)
from dragoman.objects import Gateway, GatewayListener, ObjectKey, RouteGroupKind
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.store import NamespacedName, Store

HTTP_ROUTE_KINDS = (RouteGroupKind("HTTPRoute"), RouteGroupKind("GRPCRoute"))
# Route kinds each protocol dragoman serves can carry; other protocols are not accepted.
ROUTE_KINDS_BY_PROTOCOL: Mapping[str, tuple[RouteGroupKind, ...]] = {
    "HTTP": HTTP_ROUTE_KINDS,
    "HTTPS": HTTP_ROUTE_KINDS,
}
SUPPORTED_PROTOCOLS = frozenset(ROUTE_KINDS_BY_PROTOCOL)


@dataclass(frozen=True, slots=True)
class ListenerVerdict:
    gateway: ObjectKey
    index: int  # in spec.listeners
    listener: GatewayListener
    # The route kinds it admits: its protocol's, narrowed by allowedRoutes.kinds.
    supported_kinds: tuple[RouteGroupKind, ...]
    not_accepted: Problem | None = None  # UnsupportedProtocol
    conflict: Problem | None = None  # ProtocolConflict or HostnameConflict
    unresolved: tuple[Problem, ...] = ()  # InvalidRouteKinds, InvalidCertificateRef, ...
    certificates: tuple[TlsCertificate, ...] = ()  # HTTPS: the usable ones

    @property
    def name(self) -> str:
        return self.listener.name

    @property
    def attachable(self) -> bool:
        """Routes may attach (and are counted), even if the listener cannot be served."""
        return self.not_accepted is None and bool(self.supported_kinds)

    @property
    def programmed(self) -> bool:
        return self.not_programmed_reason is None

    @property
    def not_programmed_reason(self) -> str | None:
        if self.not_accepted is not None:
            return self.not_accepted.message
        if self.conflict is not None:
            return self.conflict.message
        if not self.supported_kinds:
            return "the listener admits no route kind dragoman serves"
        if self.listener.protocol == "HTTPS" and not self.certificates:
            return "the listener has no usable TLS certificate"
        return None


@dataclass(frozen=True, slots=True)
class GatewayVerdict:
    gateway: Gateway
    listeners: tuple[ListenerVerdict, ...]
    # Why the whole Gateway is not accepted (its class or parametersRef); None: it may be.
    rejection: Problem | None = None
    note: str = ""  # about its GatewayClass, for the Accepted message

    @property
    def accepted(self) -> bool:
        return self.rejection is None and any(v.not_accepted is None for v in self.listeners)

    def listener(self, name: str) -> ListenerVerdict | None:
        return next((v for v in self.listeners if v.name == name), None)

    def served(self) -> tuple[ListenerVerdict, ...]:
        """The listeners Envoy gets, in spec order."""
        if not self.accepted:
            return ()
        return tuple(v for v in self.listeners if v.programmed)


@dataclass(frozen=True, slots=True)
class Frontends:
    """dragoman's GatewayClasses and Gateways, judged."""

    classes: Mapping[str, ClassVerdict]
    gateways: Mapping[NamespacedName, GatewayVerdict]  # dragoman's, by (namespace, name)
    problems: tuple[Problem, ...]
    # Whether a parentRef to a Gateway that does not exist gets a status entry: in manifest
    # mode dragoman is the only controller; in a cluster the Gateway may be another's to be.
    owns_missing_gateways: bool = True

    def ordered(self) -> list[GatewayVerdict]:
        return [self.gateways[key] for key in sorted(self.gateways)]


def frontends(context: BuildContext) -> Frontends:
    store, options = context.store, context.options
    classes = class_verdicts(store, options)
    problems = [v.problem for v in classes.values() if v.problem is not None]
    gateways: dict[NamespacedName, GatewayVerdict] = {}
    for key in sorted(store.gateways):
        gateway = store.gateways[key]
        decision = class_decision(gateway, store, classes, options)
        if not decision.ours:
            if not options.require_gateway_class:
                problems.append(_not_ours(gateway, store))
            continue
        verdict = _judge(gateway, context, decision.note, decision.refused)
        gateways[key] = verdict
        if verdict.rejection is not None:
            problems.append(verdict.rejection)
        for listener in verdict.listeners:
            problems.extend(p for p in (listener.not_accepted, listener.conflict) if p)
            problems.extend(listener.unresolved)
    return Frontends(
        classes=classes,
        gateways=gateways,
        problems=tuple(problems),
        owns_missing_gateways=not options.require_gateway_class,
    )


def listener_name(port: int) -> str:
    """The Envoy listener, and its route table, for one plain-HTTP port."""
    return f"http-{port}"


def _not_ours(gateway: Gateway, store: Store) -> Problem:
    gateway_class = store.gateway_classes[("", gateway.gateway_class_name)]
    return Problem(
        object=gateway.key,
        field="spec.gatewayClassName",
        reason="NotServed",
        message=f"GatewayClass {gateway_class.meta.name!r} names controller "
        f"{gateway_class.controller_name!r}, not dragoman's: this Gateway is not served",
    )


def _judge(
    gateway: Gateway, context: BuildContext, note: str, class_refused: bool
) -> GatewayVerdict:
    rejection = None
    if class_refused:
        # The only reason dragoman refuses one of its classes is its parametersRef.
        rejection = Problem(gateway.key, "spec.gatewayClassName", "InvalidParameters", note)
    elif gateway.parameters_ref is not None:
        ref = gateway.parameters_ref
        rejection = Problem(
            gateway.key,
            "spec.infrastructure.parametersRef",
            "InvalidParameters",
            f"dragoman takes no parameters; remove parametersRef (it names {ref.kind} "
            f"{ref.name!r})",
        )
    verdicts = [
        _listener_verdict(gateway, index, context) for index in range(len(gateway.listeners))
    ]
    return GatewayVerdict(
        gateway=gateway,
        listeners=_with_conflicts(gateway, verdicts),
        rejection=rejection,
        note="" if class_refused else note,
    )


def _listener_verdict(gateway: Gateway, index: int, context: BuildContext) -> ListenerVerdict:
    listener = gateway.listeners[index]
    at = f"spec.listeners[{index}]"
    protocol_kinds = ROUTE_KINDS_BY_PROTOCOL.get(listener.protocol)
    if protocol_kinds is None:
        supported = ", ".join(sorted(SUPPORTED_PROTOCOLS))
        problem = Problem(
            gateway.key,
            f"{at}.protocol",
            "UnsupportedProtocol",
            f"listener {listener.name!r} uses protocol {listener.protocol!r}; dragoman "
            f"serves {supported}",
        )
        return ListenerVerdict(gateway.key, index, listener, (), not_accepted=problem)
    unresolved: list[Problem] = []
    kinds = _supported_kinds(gateway, index, protocol_kinds, unresolved)
    certificates: tuple[TlsCertificate, ...] = ()
    if listener.protocol == "HTTPS":
        certificates = _certificates(gateway, index, context, unresolved)
    return ListenerVerdict(
        gateway.key,
        index,
        listener,
        kinds,
        unresolved=tuple(unresolved),
        certificates=certificates,
    )


def _supported_kinds(
    gateway: Gateway,
    index: int,
    protocol_kinds: tuple[RouteGroupKind, ...],
    unresolved: list[Problem],
) -> tuple[RouteGroupKind, ...]:
    listener = gateway.listeners[index]
    if not listener.allowed_kinds:
        return protocol_kinds
    invalid = [kind for kind in listener.allowed_kinds if kind not in protocol_kinds]
    if invalid:
        unresolved.append(
            Problem(
                gateway.key,
                f"spec.listeners[{index}].allowedRoutes.kinds",
                "InvalidRouteKinds",
                f"listener {listener.name!r} names route kinds "
                f"{', '.join(str(kind) for kind in invalid)} that a {listener.protocol} "
                f"listener cannot carry (supported: "
                f"{', '.join(kind.kind for kind in protocol_kinds)})",
            )
        )
    return tuple(kind for kind in protocol_kinds if kind in listener.allowed_kinds)


def _certificates(
    gateway: Gateway,
    index: int,
    context: BuildContext,
    unresolved: list[Problem],
) -> tuple[TlsCertificate, ...]:
    listener = gateway.listeners[index]
    at = f"spec.listeners[{index}].tls"
    if listener.tls is None or not listener.tls.certificate_refs:
        unresolved.append(
            Problem(
                gateway.key,
                at,
                "InvalidCertificateRef",
                f"HTTPS listener {listener.name!r} needs tls.certificateRefs naming a "
                "kubernetes.io/tls Secret",
            )
        )
        return ()
    usable = []
    referrer = Referrer(GATEWAY_GROUP, "Gateway", gateway.meta.namespace)
    for ref_index, ref in enumerate(listener.tls.certificate_refs):
        field = f"{at}.certificateRefs[{ref_index}]"
        namespace = ref.namespace or gateway.meta.namespace
        target = Target(ref.group, ref.kind, namespace, ref.name)

        def problem(reason: str, message: str, field: str = field) -> Problem:
            return Problem(gateway.key, field, reason, f"listener {listener.name!r}: {message}")

        if (ref.group, ref.kind) != ("", "Secret"):
            kind = f"{ref.group}/{ref.kind}" if ref.group else ref.kind
            unresolved.append(
                problem(
                    "InvalidCertificateRef",
                    f"certificateRef kind {kind!r} is not "
                    "supported; only core Secrets (group '', kind 'Secret')",
                )
            )
            continue
        if not context.grants.permits(referrer, target):
            unresolved.append(problem("RefNotPermitted", not_permitted_message(referrer, target)))
            continue
        secret = context.store.secrets.get((namespace, ref.name))
        if secret is None:
            unresolved.append(
                problem("InvalidCertificateRef", f"Secret {namespace}/{ref.name} not found")
            )
            continue
        certificate = tls_certificate(secret)
        if isinstance(certificate, str):
            unresolved.append(problem("InvalidCertificateRef", certificate))
            continue
        usable.append(certificate)
    return tuple(usable)


def _with_conflicts(
    gateway: Gateway, verdicts: list[ListenerVerdict]
) -> tuple[ListenerVerdict, ...]:
    """An earlier listener wins a port: a later one with another protocol, or with the same
    protocol and hostname, is conflicted and not served."""
    result: list[ListenerVerdict] = []
    for verdict in verdicts:
        listener = verdict.listener
        earlier = [
            v.listener
            for v in result
            if v.not_accepted is None and v.conflict is None and v.listener.port == listener.port
        ]
        conflict = None
        if verdict.not_accepted is None:
            other = next((e for e in earlier if e.protocol != listener.protocol), None)
            if other is not None:
                conflict = Problem(
                    gateway.key,
                    f"spec.listeners[{verdict.index}].protocol",
                    "ProtocolConflict",
                    f"listener {listener.name!r} uses {listener.protocol} on port "
                    f"{listener.port}, where listener {other.name!r} already uses "
                    f"{other.protocol}",
                )
            same = next((e for e in earlier if e.hostname == listener.hostname), None)
            if conflict is None and same is not None:
                hostname = repr(listener.hostname) if listener.hostname else "no hostname"
                conflict = Problem(
                    gateway.key,
                    f"spec.listeners[{verdict.index}].hostname",
                    "HostnameConflict",
                    f"listener {listener.name!r} has {hostname} on port {listener.port}, "
                    f"like listener {same.name!r}",
                )
        result.append(verdict if conflict is None else replace(verdict, conflict=conflict))
    return tuple(result)
