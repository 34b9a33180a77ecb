"""Client Status Discovery Service: what every connected client ACKed, NACKed and why.

`client_status_response` is pure (registry in, protobuf out); the servicer serves it as
envoy.service.status.v3.ClientStatusDiscoveryService on the xDS gRPC server.

What CSDS has no field for travels beside it: the node of each ClientConfig carries, under
the metadata key CONNECTION_KEY (dragoman's, whatever the client put there), when the node's
first open stream connected and from which peer; and every answer's initial gRPC metadata
names the replica that answers (REPLICA_HEADER), which is the one serving those nodes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import grpc
import re2
from envoy.admin.v3.config_dump_shared_pb2 import ClientResourceStatus, UpdateFailureState
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.status.v3 import csds_pb2_grpc
from envoy.service.status.v3.csds_pb2 import (
    ClientConfig,
    ClientStatusRequest,
    ClientStatusResponse,
)
from envoy.service.status.v3.csds_pb2 import ConfigStatus as ConfigStatusProto
from envoy.type.matcher.v3.node_pb2 import NodeMatcher
from envoy.type.matcher.v3.string_pb2 import StringMatcher
from google.protobuf.any_pb2 import Any

from dragoman.snapshots.resources import SECRET_TYPES
from dragoman.xds.protocol.resource_status import ResourceStatus
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry
from dragoman.xds.transport.access_rules import csds_access
from dragoman.xds.transport.peer_identity import peer_identity

logger = logging.getLogger("dragoman.xds")

# A request is answered on the event loop every stream shares: its work is bounded. RE2
# (Envoy's regex engine) matches in time linear in the node id, and like Envoy (runtime key
# re2.max_program_size.error_level) dragoman refuses programs over 100 instructions.
MAX_NODE_MATCHERS = 64
MAX_PATTERN_LENGTH = 1024
MAX_PROGRAM_SIZE = 100

CONNECTION_KEY = "dragoman.dev/connection"
REPLICA_HEADER = "dragoman-replica"

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered to it


class UnsupportedMatcher(ValueError):
    """A ClientStatusRequest asks to match nodes in a way dragoman does not support."""


def client_status_response(
    registry: StreamRegistry, request: ClientStatusRequest
) -> ClientStatusResponse:
    """One ClientConfig per connected node (its streams merged), matching the request.

    Raises UnsupportedMatcher for node metadata matchers and invalid regular expressions.
    """
    if len(request.node_matchers) > MAX_NODE_MATCHERS:
        raise UnsupportedMatcher(f"at most {MAX_NODE_MATCHERS} node_matchers are supported")
    matchers = [_compiled(matcher) for matcher in request.node_matchers]
    by_node: dict[tuple[str, str], list[ConnectedStream]] = {}
    for stream in sorted(registry.streams(), key=lambda s: s.stream_id):
        if not stream.identified:
            continue
        if matchers and not any(matches(stream.node_id) for matches in matchers):
            continue
        by_node.setdefault((stream.node_id, stream.node_cluster), []).append(stream)
    configs = [
        _client_config(streams, include_contents=not request.exclude_resource_contents)
        for _, streams in sorted(by_node.items())
    ]
    return ClientStatusResponse(config=configs)


def _client_config(streams: list[ConnectedStream], *, include_contents: bool) -> ClientConfig:
    node = Node()
    node.CopyFrom(streams[0].node)
    first = min(streams, key=lambda stream: stream.connected_at)
    connection = node.metadata.fields[CONNECTION_KEY].struct_value
    connection.Clear()
    connected_at = datetime.fromtimestamp(first.connected_at, UTC)
    connection.update(
        {
            "connected_at": connected_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "peer": first.peer,
            "streams": len(streams),
        }
    )
    config = ClientConfig(node=node)
    for stream in streams:
        for status in stream.resource_statuses():
            config.generic_xds_configs.append(_generic(status, include_contents))
    return config


def _generic(status: ResourceStatus, include_contents: bool) -> ClientConfig.GenericXdsConfig:
    entry = ClientConfig.GenericXdsConfig(
        type_url=status.type_url,
        name=status.name,
        version_info=status.version,
        config_status=ConfigStatusProto.Value(status.config_status.value),
        client_status=ClientResourceStatus.Value(status.client_status.value),
    )
    # A Secret's body holds a private key: CSDS says only its name and version.
    if include_contents and status.resource is not None and status.type_url not in SECRET_TYPES:
        entry.xds_config.CopyFrom(Any(type_url=status.type_url, value=status.resource.body))
    if status.error is not None:
        entry.error_state.CopyFrom(
            UpdateFailureState(details=status.error.message, version_info=status.error.version)
        )
    return entry


def _compiled(matcher: NodeMatcher) -> Callable[[str], bool]:
    """Whether a node id matches `matcher`, checked and compiled once per request."""
    if matcher.node_metadatas:
        raise UnsupportedMatcher("node_matchers[].node_metadatas is not supported; match node_id")
    if not matcher.HasField("node_id"):
        return lambda node_id: True
    return string_matcher(matcher.node_id, "node_matchers[].node_id")


def string_matcher(matcher: StringMatcher, field: str = "matcher") -> Callable[[str], bool]:
    """Envoy's StringMatcher semantics for exact, prefix, suffix, contains and safe_regex (as
    RE2, the engine Envoy uses). Raises UnsupportedMatcher, naming `field`, for other kinds
    and for patterns Envoy would refuse."""
    which = matcher.WhichOneof("match_pattern")
    if which is None:
        return lambda value: True
    if which == "safe_regex":
        regex = _regex(matcher.safe_regex.regex, f"{field}.safe_regex.regex")
        return lambda value: regex.fullmatch(value) is not None
    if which not in ("exact", "prefix", "suffix", "contains"):
        raise UnsupportedMatcher(f"{field}.{which} is not supported")
    pattern: str = getattr(matcher, which)
    fold = matcher.ignore_case
    if fold:
        pattern = pattern.lower()
    comparisons: dict[str, Callable[[str, str], bool]] = {
        "exact": str.__eq__,
        "prefix": str.startswith,
        "suffix": str.endswith,
        "contains": str.__contains__,
    }
    compare = comparisons[which]
    return lambda value: compare(value.lower() if fold else value, pattern)


def _regex(pattern: str, field: str) -> re2._Regexp:
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise UnsupportedMatcher(f"{field}: longer than {MAX_PATTERN_LENGTH} characters")
    try:
        compiled = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        raise UnsupportedMatcher(f"{field}: invalid RE2 regular expression: {detail}") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise UnsupportedMatcher(
            f"{field}: too complex (RE2 program size {compiled.programsize}, "
            f"at most {MAX_PROGRAM_SIZE})"
        )
    return compiled


class ClientStatusService(csds_pb2_grpc.ClientStatusDiscoveryServiceServicer):
    """CSDS over the registry of connected xDS streams."""

    def __init__(self, registry: StreamRegistry) -> None:
        self._registry = registry

    async def FetchClientStatus(
        self, request: ClientStatusRequest, context: grpc.aio.ServicerContext
    ) -> ClientStatusResponse:
        return await self._answer(request, context, first=True)

    async def StreamClientStatus(
        self,
        request_iterator: AsyncIterator[ClientStatusRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[ClientStatusResponse]:
        first = True
        async for request in request_iterator:
            yield await self._answer(request, context, first=first)
            first = False

    async def _answer(
        self, request: ClientStatusRequest, context: grpc.aio.ServicerContext, *, first: bool
    ) -> ClientStatusResponse:
        authenticated, identity = peer_identity(context)
        refusal = csds_access(identity, authenticated)
        if refusal is not None:
            logger.warning("CSDS refused: peer=%s: %s", context.peer(), refusal.message)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal.message)
        if first:  # to a peer allowed to know
            await context.send_initial_metadata(((REPLICA_HEADER, self._registry.replica),))
        try:
            return client_status_response(self._registry, request)
        except UnsupportedMatcher as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            raise  # abort raises; this keeps type checkers and readers sure of it


def add_to_server(server: grpc.aio.Server, registry: StreamRegistry) -> None:
    csds_pb2_grpc.add_ClientStatusDiscoveryServiceServicer_to_server(
        ClientStatusService(registry), server
    )
