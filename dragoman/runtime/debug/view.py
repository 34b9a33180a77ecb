"""One consistent view of what a serving process holds, taken on its event loop: immutable
values (the store, the DAG, the snapshots) and a copy of each connected stream's state."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.model import Dag, ObjectStatus
from dragoman.objects import ObjectKey
from dragoman.objects.backend_policy import BackendPolicy
from dragoman.objects.xbackend_traffic_policy import XBackendTrafficPolicy
from dragoman.runtime.controller import Controller
from dragoman.runtime.summary import ExternalNameState, external_name_states
from dragoman.snapshots.resources import SHORT_NAMES, Snapshot
from dragoman.store import Store
from dragoman.xds.protocol.client_kind import is_grpc_client
from dragoman.xds.server.stream_registry import StreamRegistry


@dataclass(frozen=True, slots=True)
class TypeView:
    type: str  # CDS, EDS, LDS, RDS
    sent_version: str
    acked_version: str
    nack: str  # the client's reason for its last NACK, "" if none


@dataclass(frozen=True, slots=True)
class StreamView:
    node_id: str
    node_cluster: str
    peer: str
    service: str  # ADS, CDS, ...
    delta: bool
    client: str  # envoy or grpc
    group: str
    types: tuple[TypeView, ...]


@dataclass(frozen=True, slots=True)
class PolicyView:
    """A policy attached to a Service, as the page draws it on the Service's node."""

    name: str  # kind/namespace/name
    state: str  # its condition, e.g. "Accepted" or "Invalid: spec.timeout ..."
    accepted: bool  # drawn as a detail when accepted, as a problem when not


@dataclass(frozen=True, slots=True)
class DebugView:
    store: Store | None = None
    dag: Dag | None = None
    snapshots: Mapping[str, Snapshot] = field(default_factory=dict)
    dns: DnsObservations = field(default_factory=dict)
    dns_check: bool = False
    external_names: Mapping[ObjectKey, ExternalNameState] = field(default_factory=dict)
    streams: tuple[StreamView, ...] = ()
    # What the source could not read (file, object, field, reason), as text.
    source_errors: tuple[str, ...] = ()
    # The policies attached to each Service (see `service_policies`).
    service_policies: Mapping[ObjectKey, tuple[PolicyView, ...]] = field(default_factory=dict)


def take_view(
    controller: Controller,
    streams: StreamRegistry | None,
    source_errors: Callable[[], Iterable[str]] = lambda: (),
) -> DebugView:
    """Call on the event loop."""
    return DebugView(
        store=controller.store,
        dag=controller.dag,
        snapshots=dict(controller.snapshots),
        dns=dict(controller.dns),
        dns_check=controller.build_options.dns_check,
        external_names=external_name_states(
            controller.store, controller.dag, controller.build_options, controller.dns
        ),
        streams=tuple(_streams(streams)) if streams is not None else (),
        source_errors=tuple(source_errors()),
        service_policies=service_policies(controller),
    )


def service_policies(controller: Controller) -> dict[ObjectKey, tuple[PolicyView, ...]]:
    """The policies attached to each Service, keyed by the Service (see `policies_by_service`)."""
    return policies_by_service(controller.dag.statuses if controller.dag is not None else {})


def policies_by_service(
    statuses: Mapping[ObjectKey, ObjectStatus],
) -> dict[ObjectKey, tuple[PolicyView, ...]]:
    """Each Service's BackendPolicies and XBackendTrafficPolicies with their Accepted
    condition, read from the statuses the build computed: a policy names each Service it
    targets as an ancestor (a policy that names none is not attached to any Service, and is
    shown among the problems)."""
    found: dict[ObjectKey, list[PolicyView]] = {}
    for key, status in sorted(statuses.items()):
        if key.kind not in _POLICY_KINDS:
            continue
        for ancestor in status.status.get("ancestors", ()):
            ref = ancestor.get("ancestorRef", {})
            if ref.get("group", "") != "" or ref.get("kind") != "Service":
                continue
            service = ObjectKey("Service", ref.get("namespace", key.namespace), ref["name"])
            found.setdefault(service, []).append(_policy_view(key, ancestor))
    return {service: tuple(views) for service, views in found.items()}


_POLICY_KINDS = frozenset({BackendPolicy.kind, XBackendTrafficPolicy.kind})


def _policy_view(key: ObjectKey, ancestor: Mapping[str, Any]) -> PolicyView:
    accepted = next(
        (c for c in ancestor.get("conditions", ()) if c.get("type") == "Accepted"), None
    )
    if accepted is None:
        return PolicyView(str(key), "no Accepted condition", accepted=False)
    if accepted.get("status") == "True":
        return PolicyView(str(key), "Accepted", accepted=True)
    state = f"{accepted.get('reason', 'NotAccepted')}: {accepted.get('message', '')}"
    return PolicyView(str(key), state.rstrip(": "), accepted=False)


def _streams(registry: StreamRegistry) -> Iterable[StreamView]:
    for stream in registry.streams():
        if not stream.identified:
            continue
        types = tuple(
            TypeView(
                type=SHORT_NAMES.get(status.type_url, status.type_url.rsplit(".", 1)[-1]),
                sent_version=status.sent_version,
                acked_version=status.acked_version,
                nack=status.last_nack.message if status.last_nack is not None else "",
            )
            for status in stream.type_statuses()
        )
        yield StreamView(
            node_id=stream.node_id,
            node_cluster=stream.node_cluster,
            peer=stream.peer,
            service=stream.service,
            delta=stream.delta,
            client="grpc" if is_grpc_client(stream.node) else "envoy",
            group=stream.group,
            types=types,
        )
