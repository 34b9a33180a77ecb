"""The variants of a node group's snapshot that clients are served, and what makes them.

Serving does not know what is in a resource: the variants are made above it and handed to
the SnapshotCache (gRPC clients' snapshots with each change, the per-type rewrite once).
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from dragoman.snapshots.resources import Snapshot


class ConfigSources(Enum):
    """How a stream's client fetches the EDS and RDS resources its clusters and listeners name."""

    ADS = "ads"  # as translated: `ads {}`
    PER_TYPE_SOTW = "per-type"
    PER_TYPE_DELTA = "per-type-delta"


class PerTypeVariant(Protocol):
    """Makes what a client on per-type streams sees of a snapshot translated for ADS clients
    (`dragoman.envoy.translation.per_type.PerTypeConfigSources`)."""

    # The bootstrap cluster the per-type config sources name (for messages).
    cluster_name: str

    def per_type(self, snapshot: Snapshot, *, delta: bool) -> Snapshot: ...


class GroupSnapshots(Protocol):
    """Snapshots made per node group on demand (the gRPC clients' variant)."""

    def snapshot(self, group: str) -> Snapshot: ...
