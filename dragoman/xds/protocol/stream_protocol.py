"""What the SotW and delta stream state machines share: the client's node, the snapshot
served, its last nonce, the events collected for the shell, and which type a request is
about. What to send, and when, is each protocol's own (`sotw_stream`, `delta_stream`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.snapshots.resources import ENDPOINT, Snapshot, TypeSnapshot, ads_ordered
from dragoman.xds.protocol.client_kind import is_grpc_client
from dragoman.xds.protocol.digest_maps import DigestMaps
from dragoman.xds.protocol.events import MissingTypeUrl, StreamEvent, WrongTypeUrl
from dragoman.xds.protocol.make_before_break import NAMING_TYPES, ClusterWarmth, routes_settled
from dragoman.xds.protocol.resource_status import ResourceStatus, TypeStatus
from dragoman.xds.protocol.sotw_state import WholeTypeDiffs
from dragoman.xds.protocol.wire import DeltaResponse, ResponseBodies, SotwResponse


class TypeStateView(Protocol):
    """What CSDS asks of the state one protocol keeps per type."""

    def type_status(self) -> TypeStatus: ...

    def resource_statuses(self, current: TypeSnapshot) -> list[ResourceStatus]: ...


S = TypeVar("S", bound=TypeStateView)  # what the protocol remembers per type
R = TypeVar("R", SotwResponse, DeltaResponse)


@dataclass(frozen=True, slots=True, eq=False)
class StreamMemos:
    """What the streams of one SnapshotCache compute once and share: encoded response
    bodies, (delta) digest maps and their diffs, and (SotW) the
    diffs between whole type snapshots. Owned by the cache; a stream made without one gets
    its own."""

    bodies: ResponseBodies = field(default_factory=ResponseBodies)
    digest_maps: DigestMaps = field(default_factory=DigestMaps)
    whole_diffs: WholeTypeDiffs = field(default_factory=WholeTypeDiffs)


class StreamProtocol(Generic[S]):
    """Protocol state of one stream. `type_url` None: ADS, else the only type served."""

    def __init__(self, type_url: str | None = None, memos: StreamMemos | None = None) -> None:
        self.type_url = type_url
        self.memos = memos if memos is not None else StreamMemos()
        self.node: Node | None = None  # from the first request that carries one
        # An empty first LDS/CDS request means "everything", except from proxyless gRPC
        # clients, which always name what they want (an empty list then means nothing).
        self.legacy_wildcard = True
        self.types: dict[str, S] = {}
        self._snapshot: Snapshot | None = None
        self._nonce = 0  # the last nonce sent, of any type: each is larger
        self._events: list[StreamEvent] = []
        # Whether the clusters sent are warm yet: this ADS stream's own; on per-type streams
        # the shell gives every stream of a node the same one.
        self.warmth = ClusterWarmth()

    @property
    def is_ads(self) -> bool:
        return self.type_url is None

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot the stream's responses were last computed from."""
        return self._snapshot

    def type_statuses(self) -> list[TypeStatus]:
        """Where each type of this stream stands (CSDS, the debug page)."""
        return [state.type_status() for state in self.types.values()]

    def resource_statuses(self) -> list[ResourceStatus]:
        """Every resource the client holds or asked for, in ADS type order then by name."""
        snapshot = self._snapshot
        out: list[ResourceStatus] = []
        for type_url in ads_ordered(self.types):
            if snapshot is None or type_url not in snapshot.types:
                continue  # a type dragoman does not serve
            out += self.types[type_url].resource_statuses(snapshot.of_type(type_url))
        return out

    def take_events(self) -> list[StreamEvent]:
        """Events since the last call (NACKs, ACKs, ignored stale requests), oldest first."""
        events, self._events = self._events, []
        return events

    def _begin(self, request: DiscoveryRequest | DeltaDiscoveryRequest, snapshot: Snapshot) -> str:
        """The type `request` is about. Takes the node from the first request carrying one,
        and `snapshot` as the one served if there is none yet.

        Raises StreamError for a type_url the stream cannot take.
        """
        type_url = self._type_of(request.type_url)
        if self.node is None and request.HasField("node"):
            # A copy: a reference would keep the whole first request alive. Envoy lists its
            # 500-odd extensions in the node (120 KiB per stream once parsed); nothing here
            # reads them, so the copy leaves them out.
            self.node = without_extensions(request.node)
            self.legacy_wildcard = not is_grpc_client(request.node)
        if self._snapshot is None:
            self._snapshot = snapshot
        return type_url

    def _type_of(self, requested: str) -> str:
        if self.type_url is None:
            if not requested:
                raise MissingTypeUrl("an ADS request must carry a type_url")
            return requested
        if requested and requested != self.type_url:
            raise WrongTypeUrl(f"this stream serves {self.type_url}, not {requested}")
        return self.type_url

    def _holds(self, type_url: str) -> bool:
        """Whether an update of `type_url` (listeners, routes) waits for clusters to warm."""
        assert self._snapshot is not None
        return self.warmth.hold(type_url, self._snapshot)

    def _clusters_warmed(self) -> bool:
        """True once the clusters sent are warm while an update waited for them: this stream
        pushes what it held, and per-type streams of the node are woken to do the same."""
        if self._snapshot is None or not self.warmth.woken(self._snapshot):
            return False
        if self.warmth.wake is not None:
            self.warmth.wake()
        return True

    def _track(self, type_url: str, state: S) -> None:
        """A type's sub-stream begins: make-before-break reads the ones it needs."""
        if type_url == ENDPOINT:
            self.warmth.endpoints = state  # type: ignore[assignment]  # both states are HeldType
        elif type_url in NAMING_TYPES:
            self.warmth.naming[type_url] = state  # type: ignore[assignment]  # as above

    def _routes_settled(self) -> bool:
        """Whether the client runs the current listeners and routes (this ADS stream's, or
        the per-type streams' of its node)."""
        assert self._snapshot is not None
        settled = routes_settled(self.warmth.naming, self._snapshot)
        if not settled:
            self.warmth.removals_waiting = True
        return settled

    def _routes_replaced(self) -> None:
        """Per-type: wake the node's streams whose removals wait, once the routes settled."""
        warmth, snapshot = self.warmth, self._snapshot
        if warmth.removals_waiting and warmth.wake is not None and snapshot is not None:
            settled = routes_settled(warmth.naming, snapshot)
            if settled:
                warmth.removals_waiting = False
                warmth.wake()

    def _numbered(self, response: R) -> R:
        """`response`, whose nonce (drawn by the shared bodies, larger than this stream's
        last) is now this stream's last."""
        self._nonce = int(response.nonce)
        return response

    def _serves(self, type_url: str) -> bool:
        """Whether the snapshot has this type at all. Types it lacks get no answer: a type
        dragoman does not serve, or every type of a snapshot not available (Snapshot())."""
        assert self._snapshot is not None
        return type_url in self._snapshot.types

    def _current(self, type_url: str) -> TypeSnapshot:
        assert self._snapshot is not None
        return self._snapshot.of_type(type_url)

    def _order(self) -> list[str]:
        return ads_ordered(self.types)


def without_extensions(node: Node) -> Node:
    """A copy of `node` without its `extensions` list, in an arena of its own."""
    if not len(node.extensions):
        copy = Node()
        copy.CopyFrom(node)
        return copy
    trimmed = Node()
    trimmed.CopyFrom(node)
    trimmed.ClearField("extensions")
    # Cleared fields keep their arena memory: a fresh parse holds only what is left.
    return Node.FromString(trimmed.SerializeToString())
