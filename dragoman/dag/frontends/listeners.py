"""Gateways to verdicts on each listener: what it admits, whether it conflicts, which TLS
certificates it terminates with, and so whether dragoman can serve (program) it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from dragoman.dag.context import BuildContext
from dragoman.dag.frontends.client_certificates import client_certificate
from dragoman.dag.frontends.client_validation import NO_VALID_CA_CERTIFICATE, client_validation
from dragoman.dag.frontends.gateway_classes import ClassVerdict, class_decision, class_verdicts
from dragoman.dag.frontends.route_tables import route_tables_per_host
from dragoman.dag.model import ClientValidation, Problem, TlsCertificate
from dragoman.dag.reference_grants import (
    Referrer,
    Target,
    not_permitted_message,
)
from dragoman.dag.tls_certificates import dropped_from_chain, tls_certificate
from dragoman.objects import Gateway, GatewayListener, ListenerSet, ObjectKey, RouteGroupKind
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.store import NamespacedName, Store

HTTP_ROUTE_KINDS = (RouteGroupKind("HTTPRoute"), RouteGroupKind("GRPCRoute"))
# Route kinds each protocol dragoman serves can carry; other protocols are not accepted.
ROUTE_KINDS_BY_PROTOCOL: Mapping[str, tuple[RouteGroupKind, ...]] = {
    "HTTP": HTTP_ROUTE_KINDS,
    "HTTPS": HTTP_ROUTE_KINDS,
    "TCP": (RouteGroupKind("TCPRoute"),),
    "TLS": (RouteGroupKind("TLSRoute"),),
    "UDP": (RouteGroupKind("UDPRoute"),),
}
# Protocols whose connections are proxied whole (TCPRoute, TLSRoute) or as datagrams.
L4_PROTOCOLS = frozenset({"TCP", "TLS", "UDP"})
SUPPORTED_PROTOCOLS = frozenset(ROUTE_KINDS_BY_PROTOCOL)


@dataclass(frozen=True, slots=True)
class ListenerVerdict:
    gateway: ObjectKey
    index: int  # in spec.listeners
    listener: GatewayListener
    # The route kinds it admits: its protocol's, narrowed by allowedRoutes.kinds.
    supported_kinds: tuple[RouteGroupKind, ...]
    not_accepted: Problem | None = None  # UnsupportedProtocol, NoValidCACertificate
    conflict: Problem | None = None  # ProtocolConflict or HostnameConflict
    unresolved: tuple[Problem, ...] = ()  # InvalidRouteKinds, InvalidCertificateRef, ...
    certificates: tuple[TlsCertificate, ...] = ()  # HTTPS: the usable ones
    # The Gateway's spec.tls.frontend for the listener's port, when it asks for one.
    client_validation: ClientValidation | None = None
    # Its Gateway's dragoman.dev/route-tables is per-host: a route table per hostname.
    per_host_routes: bool = False
    # Whether Envoy gets it (not_programmed_reason is None): made once, as every route
    # attaching to the listener asks.
    programmed: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "programmed", self.not_programmed_reason is None)

    @property
    def name(self) -> str:
        return self.listener.name

    @property
    def attachable(self) -> bool:
        """Routes may attach (and are counted), even if the listener cannot be served."""
        return self.not_accepted is None and bool(self.supported_kinds)

    @property
    def not_programmed_reason(self) -> str | None:
        if self.not_accepted is not None:
            return self.not_accepted.message
        if self.conflict is not None:
            return self.conflict.message
        if not self.supported_kinds:
            return "the listener admits no route kind dragoman serves"
        if self.terminates_tls and not self.certificates:
            return "the listener has no usable TLS certificate"
        return None

    @property
    def terminates_tls(self) -> bool:
        """HTTPS, or TLS in Terminate mode: Envoy needs the listener's certificates."""
        protocol, tls = self.listener.protocol, self.listener.tls
        return protocol == "HTTPS" or (
            protocol == "TLS" and tls is not None and tls.mode == "Terminate"
        )


@dataclass(frozen=True, slots=True)
class GatewayVerdict:
    gateway: Gateway | ListenerSet  # a ListenerSet's verdict has the same shape
    listeners: tuple[ListenerVerdict, ...]
    # Why the whole Gateway is not accepted (its class or parametersRef); None: it may be.
    rejection: Problem | None = None
    note: str = ""  # about its GatewayClass, for the Accepted message
    # spec.tls.backend.clientCertificateRef, resolved; or why it cannot be used.
    client_certificate: TlsCertificate | None = None
    client_certificate_problem: Problem | None = None
    parent: ObjectKey | None = None  # a ListenerSet's Gateway
    route_tables_problem: Problem | None = None  # a bad dragoman.dev/route-tables
    # Indexes made once: every route attaching looks its listeners up (a Gateway may have
    # thousands of TCP listeners, each with its route).
    _by_name: dict[str, ListenerVerdict] = field(init=False, repr=False, compare=False)
    _by_kind: dict[RouteGroupKind, tuple[ListenerVerdict, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        by_name: dict[str, ListenerVerdict] = {}
        by_kind: dict[RouteGroupKind, list[ListenerVerdict]] = {}
        for verdict in self.listeners:
            by_name.setdefault(verdict.name, verdict)
            if verdict.attachable:
                for kind in verdict.supported_kinds:
                    by_kind.setdefault(kind, []).append(verdict)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_kind", {k: tuple(v) for k, v in by_kind.items()})

    @property
    def accepted(self) -> bool:
        return self.rejection is None and any(v.not_accepted is None for v in self.listeners)

    def listener(self, name: str) -> ListenerVerdict | None:
        return self._by_name.get(name)

    def admitting(self, kind: RouteGroupKind) -> tuple[ListenerVerdict, ...]:
        """The listeners routes of this kind may attach to, in spec order."""
        return self._by_kind.get(kind, ())

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
    # ListenerSets naming one of dragoman's Gateways, judged like Gateways, by (ns, name);
    # and the accepted ones of each Gateway, in precedence order.
    listener_sets: Mapping[NamespacedName, GatewayVerdict] = field(default_factory=dict)
    children: Mapping[ObjectKey, tuple[GatewayVerdict, ...]] = field(default_factory=dict)

    def ordered(self) -> list[GatewayVerdict]:
        return [self.gateways[key] for key in sorted(self.gateways)]

    def with_children(self, verdict: GatewayVerdict) -> list[GatewayVerdict]:
        """A Gateway and the ListenerSets that add listeners to it."""
        return [verdict, *self.children.get(verdict.gateway.key, ())]

    def owner(self, key: ObjectKey) -> ObjectKey:
        """The Gateway a listener owner (a Gateway, or one of its ListenerSets) belongs to."""
        if key.kind == "ListenerSet":
            verdict = self.listener_sets.get((key.namespace, key.name))
            if verdict is not None and verdict.parent is not None:
                return verdict.parent
        return key


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
        if verdict.client_certificate_problem is not None:
            problems.append(verdict.client_certificate_problem)
        if verdict.route_tables_problem is not None:
            problems.append(verdict.route_tables_problem)
        for listener in verdict.listeners:
            problems.extend(p for p in (listener.not_accepted, listener.conflict) if p)
            problems.extend(listener.unresolved)
    # Imported here: ListenerSets are judged with this module's listener verdicts.
    from dragoman.dag.frontends.listener_sets import listener_sets

    judged = listener_sets(context, gateways, not options.require_gateway_class)
    problems.extend(judged.problems)
    return Frontends(
        classes=classes,
        gateways=gateways,
        problems=tuple(problems),
        owns_missing_gateways=not options.require_gateway_class,
        listener_sets=judged.verdicts,
        children=judged.children,
    )


def listener_name(port: int) -> str:
    """The Envoy listener, and its route table, for one plain-HTTP port."""
    return f"http-{port}"


def port_key(listener: GatewayListener) -> tuple[int, str]:
    """The socket a listener needs: its port number, in the UDP or the TCP space."""
    return listener.port, "udp" if listener.protocol == "UDP" else "tcp"


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
        listener_verdict(gateway, index, context, gateway)
        for index in range(len(gateway.listeners))
    ]
    certificate = client_certificate(gateway, context)
    per_host = route_tables_per_host(gateway)
    return GatewayVerdict(
        gateway=gateway,
        listeners=with_conflicts(verdicts),
        rejection=rejection,
        note="" if class_refused else note,
        client_certificate=certificate if isinstance(certificate, TlsCertificate) else None,
        client_certificate_problem=certificate if isinstance(certificate, Problem) else None,
        route_tables_problem=per_host if isinstance(per_host, Problem) else None,
    )


def listener_verdict(
    gateway: Gateway | ListenerSet, index: int, context: BuildContext, parent: Gateway
) -> ListenerVerdict:
    """`parent`: the Gateway the listener is served on (`gateway` itself, or a ListenerSet's
    parent), whose spec.tls.frontend applies to it."""
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
    validation = None
    not_accepted = None
    verdict = ListenerVerdict(gateway.key, index, listener, kinds)
    if verdict.terminates_tls:
        certificates = _certificates(gateway, index, context, unresolved)
        validation, not_accepted = _client_validation(gateway, index, context, parent, unresolved)
    return ListenerVerdict(
        gateway.key,
        index,
        listener,
        kinds,
        not_accepted=not_accepted,
        unresolved=tuple(unresolved),
        certificates=certificates,
        client_validation=validation,
        per_host_routes=route_tables_per_host(parent) is True,
    )


def _client_validation(
    gateway: Gateway | ListenerSet,
    index: int,
    context: BuildContext,
    parent: Gateway,
    unresolved: list[Problem],
) -> tuple[ClientValidation | None, Problem | None]:
    """The listener's client certificate validation, and why it is not accepted (every CA
    reference of its configuration invalid); its reference problems go to `unresolved`."""
    listener = gateway.listeners[index]
    judged = client_validation(parent, listener.port, context)
    if judged is None:
        return None, None
    own = gateway is parent
    # A ListenerSet's listener reports its parent's field under its own tls.
    where = "" if own else f"Gateway {parent.meta.namespace}/{parent.meta.name} "
    for problem in judged.problems:
        unresolved.append(
            Problem(
                gateway.key,
                problem.field if own else f"spec.listeners[{index}].tls",
                problem.reason,
                f"listener {listener.name!r}: {where}{problem.message}",
            )
        )
    if judged.validation is not None:
        return judged.validation, None
    field = judged.field if own else f"spec.listeners[{index}].tls"
    return None, Problem(
        gateway.key,
        field,
        NO_VALID_CA_CERTIFICATE,
        f"listener {listener.name!r}: no valid CA certificate to validate clients' "
        f"certificates with ({where}spec.tls.frontend); not served, rather than served to "
        "clients unchecked",
    )


def _supported_kinds(
    gateway: Gateway | ListenerSet,
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
    gateway: Gateway | ListenerSet,
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
                f"{listener.protocol} listener {listener.name!r} needs tls.certificateRefs "
                "naming a kubernetes.io/tls Secret",
            )
        )
        return ()
    usable = []
    referrer = Referrer(GATEWAY_GROUP, gateway.kind, gateway.meta.namespace)
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
        dropped = dropped_from_chain(secret)
        if dropped is not None:
            unresolved.append(problem("InvalidCertificateRef", dropped))
        if isinstance(certificate, str):
            unresolved.append(problem("InvalidCertificateRef", certificate))
            continue
        usable.append(certificate)
    return tuple(usable)


def with_conflicts(
    verdicts: Sequence[ListenerVerdict], before: Sequence[ListenerVerdict] = ()
) -> tuple[ListenerVerdict, ...]:
    """An earlier listener wins a port: a later one with another protocol, or with the same
    protocol and hostname, is conflicted and not served. UDP ports are a space of their own:
    a UDP listener shares its number with a TCP-based one freely.

    `before`: listeners already judged that come first (a Gateway's, for its ListenerSets)."""
    result: list[ListenerVerdict] = []
    # The listeners that hold each port so far, in order: one pass, whatever the count.
    holding: dict[tuple[int, str], list[GatewayListener]] = {}

    def hold(verdict: ListenerVerdict) -> None:
        if verdict.not_accepted is None and verdict.conflict is None:
            holding.setdefault(port_key(verdict.listener), []).append(verdict.listener)

    for verdict in before:
        hold(verdict)
    for verdict in verdicts:
        listener = verdict.listener
        earlier = holding.get(port_key(listener), [])
        conflict = None
        if verdict.not_accepted is None:
            other = next((e for e in earlier if e.protocol != listener.protocol), None)
            if other is not None:
                conflict = Problem(
                    verdict.gateway,
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
                    verdict.gateway,
                    f"spec.listeners[{verdict.index}].hostname",
                    "HostnameConflict",
                    f"listener {listener.name!r} has {hostname} on port {listener.port}, "
                    f"like listener {same.name!r}",
                )
        judged = verdict if conflict is None else replace(verdict, conflict=conflict)
        result.append(judged)
        hold(judged)
    return tuple(result)
