"""The snapshots being served, by node group, and a wake-up for every stream when they change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.xds.client_kind import grpc_group, split_group
from dragoman.xds.resources import Snapshot
from dragoman.xds.variants import ConfigSources, snapshot_for

EMPTY_SNAPSHOT = Snapshot()

logger = logging.getLogger("dragoman.xds")


class GroupSnapshots(Protocol):
    """Snapshots made per node group on demand (the gRPC clients' variant)."""

    def snapshot(self, group: str) -> Snapshot: ...


class SnapshotCache:
    """Holds one Snapshot per node group; streams wait on `wait_for_change`.

    Change notification is a generation counter plus one asyncio.Event per generation:
    a change sets the current event and installs a fresh one, so every waiting stream
    wakes once per change with no polling and no per-subscriber bookkeeping.
    Use it from the event loop's thread.
    """

    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}
        # The proxyless gRPC clients' snapshots (groups `<group>#grpc`), made on first use.
        self._grpc: GroupSnapshots | None = None
        # Per-type clients' variants of each group's snapshot, made on first use.
        self._variants: dict[tuple[str, ConfigSources], tuple[Snapshot, Snapshot]] = {}
        self._generation = 0
        self._changed = asyncio.Event()

    @property
    def generation(self) -> int:
        """How many times snapshots were set; 0 until the first."""
        return self._generation

    @property
    def ready(self) -> bool:
        return self._generation > 0

    @property
    def groups(self) -> frozenset[str]:
        return frozenset(self._snapshots)

    def set_snapshots(
        self, snapshots: Mapping[str, Snapshot], grpc: GroupSnapshots | None = None
    ) -> None:
        """Replace every group's snapshot and wake every waiting stream.

        `grpc` makes what gRPC clients get; None: they get the groups' snapshots as they are.
        """
        self._snapshots = dict(snapshots)
        self._grpc = grpc
        self._variants.clear()
        self._wake()

    def set_snapshot(self, group: str, snapshot: Snapshot) -> None:
        """Replace one group's snapshot, keeping the others, and wake every waiting stream."""
        self._snapshots = {**self._snapshots, group: snapshot}
        for key in [k for k in self._variants if k[0] == group]:
            del self._variants[key]
        self._wake()

    def _wake(self) -> None:
        self._generation += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def group_for(self, node_cluster: str, *, grpc: bool = False) -> str:
        """The group a node gets: the one its `node.cluster` names, if it exists, else all;
        for a proxyless gRPC client, that group's gRPC variant."""
        group = node_cluster if node_cluster in self._snapshots else ALL_GATEWAYS
        return grpc_group(group) if grpc else group

    def snapshot_for(self, group: str, sources: ConfigSources = ConfigSources.ADS) -> Snapshot:
        """The group's snapshot as a client fetching EDS/RDS through `sources` must see it."""
        base, grpc = split_group(group)
        snapshot = self._grpc_snapshot(base) if grpc else self._snapshots.get(group, EMPTY_SNAPSHOT)
        if sources is ConfigSources.ADS:
            return snapshot
        key = (group, sources)
        made = self._variants.get(key)
        if made is None or made[0] is not snapshot:
            made = self._variants[key] = (snapshot, snapshot_for(snapshot, sources))
        return made[1]

    def _grpc_snapshot(self, group: str) -> Snapshot:
        if self._grpc is None:
            return self._snapshots.get(group, EMPTY_SNAPSHOT)
        try:
            return self._grpc.snapshot(group)
        except Exception:  # a bug must not end every gRPC client's stream, again and again
            logger.exception("translating group %r for gRPC clients failed", group)
            return EMPTY_SNAPSHOT

    async def wait_ready(self) -> None:
        """Return once the first snapshots are set."""
        if not self.ready:
            await self.wait_for_change(0)

    async def wait_for_change(self, seen_generation: int) -> int:
        """Return the current generation once it differs from `seen_generation`."""
        while self._generation == seen_generation:
            await self._changed.wait()
        return self._generation
