"""The snapshots being served, by node group, and a wake-up for every stream when they change."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping

from dragoman.snapshots.gc_pause import cyclic_gc_paused
from dragoman.snapshots.resources import ADS_ORDER, ALL_GATEWAYS, EMPTY_TYPE, Snapshot
from dragoman.xds.protocol.client_kind import grpc_group, names_gateway, split_group
from dragoman.xds.protocol.stream_protocol import StreamMemos
from dragoman.xds.server.snapshot_variants import ConfigSources, GroupSnapshots, PerTypeVariant

# A group with nothing in it: every type present and empty (full-state types delete).
EMPTY_SNAPSHOT = Snapshot(types={type_url: EMPTY_TYPE for type_url in ADS_ORDER})
# Nothing can be said: no type at all, so streams answer nothing and push nothing, and
# clients keep what they hold (a failed gRPC translation must not delete their listeners).
UNAVAILABLE = Snapshot()

logger = logging.getLogger("dragoman.xds")


class SnapshotCache:
    """Holds one Snapshot per node group; streams are woken when they change.

    Change notification is a generation counter: a change calls what each stream
    `listen`s with (the stream compares generations; no task waits per stream), and sets
    one asyncio.Event per generation for `wait_for_change` (start-up, tests).
    Use it from the event loop's thread (`prepare` runs translations in a worker thread).
    """

    def __init__(self, per_type: PerTypeVariant | None = None) -> None:
        """`per_type` makes what clients on per-type streams are served; without it, only
        ADS clients can be served."""
        self._per_type = per_type
        # What the streams served from this cache compute once and share.
        self.memos = StreamMemos()
        self._snapshots: dict[str, Snapshot] = {}
        # The proxyless gRPC clients' snapshots (groups `<group>#grpc`), made on first use:
        # this change's (`_grpc_made`), the groups whose translation failed this change, the
        # last good one of each group (served while its translation fails), and the
        # translations running in worker threads.
        self._grpc: GroupSnapshots | None = None
        self._grpc_made: dict[str, Snapshot] = {}
        self._grpc_failed: set[str] = set()
        self._grpc_last_good: dict[str, Snapshot] = {}
        self._grpc_running: dict[str, asyncio.Future[None]] = {}
        # Per-type clients' variants of each group's snapshot, made on first use.
        self._variants: dict[tuple[str, ConfigSources], tuple[Snapshot, Snapshot]] = {}
        self._generation = 0
        self._changed = asyncio.Event()
        # A dict for its order: streams are woken in the order they connected.
        self._listeners: dict[Callable[[], None], None] = {}

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
        before = self._served()
        self._snapshots = dict(snapshots)
        self._grpc = grpc
        self._grpc_made, self._grpc_failed = {}, set()
        self._variants.clear()
        self._let_go(before)
        self._wake()

    def set_snapshot(self, group: str, snapshot: Snapshot) -> None:
        """Replace one group's snapshot, keeping the others, and wake every waiting stream."""
        before = self._served()
        self._snapshots = {**self._snapshots, group: snapshot}
        for key in [k for k in self._variants if k[0] == group]:
            del self._variants[key]
        self._let_go(before)
        self._wake()

    def _served(self) -> list[Snapshot]:
        return [
            *self._snapshots.values(),
            *self._grpc_made.values(),
            *self._grpc_last_good.values(),
            *(variant for _, variant in self._variants.values()),
        ]

    def _let_go(self, before: Iterable[Snapshot]) -> None:
        """Drop the shared response bodies of versions no longer served by any group."""
        served = _versions(self._served())
        self.memos.bodies.forget_versions(_versions(before) - served)

    def release_bodies(self) -> None:
        """Drop the encoded response bodies (at 10,000 clusters, 3.5 MiB: a second copy of
        every resource's bytes). For a quiet server, whose streams have all been answered: a
        stream that asks later has its body encoded again (tens of milliseconds)."""
        self.memos.bodies.clear()

    def _wake(self) -> None:
        self._generation += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for ring in self._listeners:
            ring()

    def listen(self, ring: Callable[[], None]) -> None:
        """Call `ring` at every change from now on (a stream's wake-up; keep it quick)."""
        self._listeners[ring] = None

    def unlisten(self, ring: Callable[[], None]) -> None:
        self._listeners.pop(ring, None)

    def group_for(self, node_cluster: str, *, grpc: bool = False) -> str:
        """The group a node gets: the Gateway its `node.cluster` names (`ns/name`; an empty
        group until that Gateway exists), else all; for a proxyless gRPC client, that group's
        gRPC variant."""
        dedicated = node_cluster in self._snapshots or names_gateway(node_cluster)
        group = node_cluster if dedicated else ALL_GATEWAYS
        return grpc_group(group) if grpc else group

    def missing_gateway(self, node_cluster: str) -> bool:
        """True when `node_cluster` names a Gateway (`ns/name`) that has no group (yet)."""
        return names_gateway(node_cluster) and node_cluster not in self._snapshots

    @property
    def per_type_cluster_name(self) -> str | None:
        """The bootstrap cluster per-type clients are told to fetch EDS and RDS through."""
        return self._per_type.cluster_name if self._per_type is not None else None

    def snapshot_for(self, group: str, sources: ConfigSources = ConfigSources.ADS) -> Snapshot:
        """The group's snapshot as a client fetching EDS/RDS through `sources` must see it."""
        base, grpc = split_group(group)
        snapshot = self._grpc_snapshot(base) if grpc else self._snapshots.get(group, EMPTY_SNAPSHOT)
        if sources is ConfigSources.ADS or snapshot is UNAVAILABLE:
            return snapshot
        key = (group, sources)
        made = self._variants.get(key)
        if made is None or made[0] is not snapshot:
            if self._per_type is None:
                raise RuntimeError("this SnapshotCache serves ADS clients only")
            delta = sources is ConfigSources.PER_TYPE_DELTA
            made = self._variants[key] = (snapshot, self._per_type.per_type(snapshot, delta=delta))
        return made[1]

    async def prepare(self, group: str) -> None:
        """Make `group`'s snapshot ready for `snapshot_for` without blocking the event loop:
        a gRPC clients' group not made yet is translated in a worker thread, once for every
        stream waiting for it. Other groups are ready at once."""
        base, grpc = split_group(group)
        while grpc and self._needs_translation(base):
            running = self._grpc_running.get(base)
            if running is None:
                running = asyncio.ensure_future(self._translate_in_thread(base))
                self._grpc_running[base] = running
                running.add_done_callback(functools.partial(self._translation_ended, base))
            # Shielded: one waiting stream going away must not cancel the others' translation.
            await asyncio.shield(running)

    def _translation_ended(self, base: str, _: asyncio.Future[None]) -> None:
        self._grpc_running.pop(base, None)

    def _needs_translation(self, base: str) -> bool:
        return (
            self._grpc is not None and base not in self._grpc_made and base not in self._grpc_failed
        )

    async def _translate_in_thread(self, base: str) -> None:
        translation = self._grpc
        assert translation is not None
        try:
            made = await asyncio.to_thread(_translate, translation, base)
        except Exception as error:
            if self._grpc is translation:  # not replaced meanwhile: this change failed
                self._translation_failed(base, error)
            return
        if self._grpc is translation:  # a result for replaced snapshots is thrown away
            self._translated(base, made)

    def _grpc_snapshot(self, base: str) -> Snapshot:
        if self._grpc is None:
            return self._snapshots.get(base, EMPTY_SNAPSHOT)
        made = self._grpc_made.get(base)
        if made is not None:
            return made
        if base not in self._grpc_failed:
            try:
                made = _translate(self._grpc, base)
            except Exception as error:  # a bug must not end every gRPC client's stream
                self._translation_failed(base, error)
            else:
                self._translated(base, made)
                return made
        return self._grpc_last_good.get(base, UNAVAILABLE)

    def _translated(self, base: str, made: Snapshot) -> None:
        self._grpc_made[base] = made
        self._grpc_last_good[base] = made

    def _translation_failed(self, base: str, error: Exception) -> None:
        # Logged once per change, with the stack trace; retried at the next change.
        self._grpc_failed.add(base)
        fallback = "the last good one" if base in self._grpc_last_good else "nothing"
        logger.error(
            "translating group %r for gRPC clients failed; serving them %s until the next change",
            base or "(all gateways)",
            fallback,
            exc_info=error,
        )

    async def wait_ready(self) -> None:
        """Return once the first snapshots are set."""
        if not self.ready:
            await self.wait_for_change(0)

    async def wait_for_change(self, seen_generation: int) -> int:
        """Return the current generation once it differs from `seen_generation`."""
        while self._generation == seen_generation:
            await self._changed.wait()
        return self._generation


def _translate(translation: GroupSnapshots, base: str) -> Snapshot:
    # A translation allocates many acyclic values too: full collections would stall the
    # process (and, from a worker thread, every stream) for nothing.
    with cyclic_gc_paused():
        return translation.snapshot(base)


def _versions(snapshots: Iterable[Snapshot]) -> set[str]:
    return {typed.version for snapshot in snapshots for typed in snapshot.types.values()}
