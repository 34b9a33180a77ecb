"""Where a client stands, type by type and resource by resource: what it ACKed, what it
rejected and why. Each stream state machine reports its own (`resource_statuses`,
`type_statuses`); CSDS (`dragoman.xds.csds.csds_service`) and `dragoman clients` present it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dragoman.snapshots.resources import Resource
from dragoman.xds.protocol.events import Nack


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


@dataclass(frozen=True, slots=True)
class TypeStatus:
    """Where one type of one stream stands."""

    type_url: str
    sent_version: str  # SotW: version_info of the last response; delta: its system version
    acked_version: str
    in_flight: bool
    last_nack: Nack | None
    subscribed: tuple[str, ...]  # explicit names, sorted
    wildcard: bool


def not_held(type_url: str, name: str, in_flight: bool, exists: bool) -> ResourceStatus:
    """A name the client does not hold: asked for, and in flight, not sent, or absent."""
    if in_flight:
        return ResourceStatus(type_url, name, "", ClientStatus.REQUESTED, ConfigStatus.STALE)
    if exists:
        return ResourceStatus(type_url, name, "", ClientStatus.REQUESTED, ConfigStatus.NOT_SENT)
    return ResourceStatus(type_url, name, "", ClientStatus.DOES_NOT_EXIST, ConfigStatus.NOT_SENT)
