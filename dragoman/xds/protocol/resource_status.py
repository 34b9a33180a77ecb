"""Where each client stands, resource by resource: what it ACKed, what it rejected and why.

Pure: computed from a stream's protocol state and the snapshot it serves. CSDS
(`dragoman.xds.csds.csds_service`) and `dragoman clients` present it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from dragoman.snapshots.resources import FULL_STATE_TYPES, Resource, TypeSnapshot, ads_ordered
from dragoman.xds.protocol.delta_state import DeltaTypeState
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Nack
from dragoman.xds.protocol.sotw_state import TypeState
from dragoman.xds.protocol.sotw_stream import SotwStream


class ClientStatus(Enum):
    """The client's side (names as in envoy.admin.v3.ClientResourceStatus)."""

    REQUESTED = "REQUESTED"  # asked for; not yet held (not sent, or sent and not yet ACKed)
    DOES_NOT_EXIST = "DOES_NOT_EXIST"  # asked for, and dragoman has no such resource
    ACKED = "ACKED"
    NACKED = "NACKED"


class ConfigStatus(Enum):
    """How the client compares with what dragoman serves (envoy.service.status.v3.ConfigStatus)."""

    SYNCED = "SYNCED"  # it runs what dragoman serves now
    NOT_SENT = "NOT_SENT"
    STALE = "STALE"  # it runs older content; newer is in flight, parked, or gone
    ERROR = "ERROR"  # it rejected the content


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    type_url: str
    name: str
    version: str  # the version the client ACKed it at ("" if none)
    client_status: ClientStatus
    config_status: ConfigStatus
    error: Nack | None = None  # the NACK that rejected the current content
    resource: Resource | None = None  # the content the client runs, when known


def resource_statuses(protocol: SotwStream | DeltaStream) -> list[ResourceStatus]:
    """Every resource a stream's client holds or asked for, in ADS type order then by name."""
    snapshot = protocol.snapshot
    out: list[ResourceStatus] = []
    for type_url in ads_ordered(protocol.types):
        if snapshot is None or type_url not in snapshot.types:
            continue  # a type dragoman does not serve
        current = snapshot.of_type(type_url)
        if isinstance(protocol, DeltaStream):
            out += _delta_statuses(protocol.types[type_url], current)
        else:
            out += _sotw_statuses(protocol.types[type_url], current)
    return out


def _sotw_statuses(state: TypeState, current: TypeSnapshot) -> list[ResourceStatus]:
    available = current.resources
    acked: Mapping[str, Resource]
    if state.type_url in FULL_STATE_TYPES:
        acked = state.acked_sent
    else:
        own = {n: r for n, r in state.sent.items() if n not in state.unacked}
        own.update({n: r for n, r in state.unacked.items() if r is not None})
        acked = own
    in_flight = set(state.sent_names) if state.in_flight else set()
    rejected = state.rejected_names if state.rejected_version is not None else frozenset()
    names = set(acked) | in_flight | rejected | state.names
    if state.wildcard:
        names.update(available)
    out = []
    for name in sorted(names):
        now = available.get(name)
        held = acked.get(name)
        version = state.acked_version if held is not None else ""
        if name in rejected and state.last_nack is not None:
            out.append(
                ResourceStatus(
                    state.type_url,
                    name,
                    version,
                    ClientStatus.NACKED,
                    ConfigStatus.ERROR,
                    state.last_nack,
                    held,
                )
            )
        elif held is not None:
            synced = name not in in_flight and now is not None and now.digest == held.digest
            config = ConfigStatus.SYNCED if synced else ConfigStatus.STALE
            out.append(
                ResourceStatus(
                    state.type_url, name, version, ClientStatus.ACKED, config, resource=held
                )
            )
        else:
            out.append(_not_held(state.type_url, name, name in in_flight, now is not None))
    return out


def _delta_statuses(state: DeltaTypeState, current: TypeSnapshot) -> list[ResourceStatus]:
    available = current.resources
    names = set(state.held) | set(state.acked) | set(state.rejected) | state.names
    if state.wildcard:
        names.update(available)
    out = []
    for name in sorted(names):
        now = available.get(name)
        acked = state.acked.get(name)
        rejected = state.rejected.get(name)
        if rejected is not None and (now is None or now.digest == rejected[0]):
            out.append(
                ResourceStatus(
                    state.type_url,
                    name,
                    acked or "",
                    ClientStatus.NACKED,
                    ConfigStatus.ERROR,
                    rejected[1],
                )
            )
        elif acked is not None:
            synced = now is not None and now.digest == acked
            out.append(
                ResourceStatus(
                    state.type_url,
                    name,
                    acked,
                    ClientStatus.ACKED,
                    ConfigStatus.SYNCED if synced else ConfigStatus.STALE,
                    resource=now if synced else None,
                )
            )
        elif now is None and name in state.absent:
            # The client was told in removed_resources: it knows, and agrees.
            out.append(
                ResourceStatus(
                    state.type_url, name, "", ClientStatus.DOES_NOT_EXIST, ConfigStatus.SYNCED
                )
            )
        else:
            out.append(_not_held(state.type_url, name, name in state.held, now is not None))
    return out


def _not_held(type_url: str, name: str, in_flight: bool, exists: bool) -> ResourceStatus:
    if in_flight:
        return ResourceStatus(type_url, name, "", ClientStatus.REQUESTED, ConfigStatus.STALE)
    if exists:
        return ResourceStatus(type_url, name, "", ClientStatus.REQUESTED, ConfigStatus.NOT_SENT)
    return ResourceStatus(type_url, name, "", ClientStatus.DOES_NOT_EXIST, ConfigStatus.NOT_SENT)
