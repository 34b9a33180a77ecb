"""What one client may make the xDS server hold or do, and the gRPC options that enforce the
parts gRPC enforces (message size, flow-control windows, streams per connection,
connections open at once, streams waiting to be taken up, handshake time, time without a
stream, connection age). The stream loop enforces the rest: request rate, stalled writes,
first responses in flight."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024

# A delta client reconnecting with 50,000 resources names each twice (subscribe and
# initial_resource_versions): 50,000 x (2 x 60-byte names + a 64-byte version + 8 bytes of
# framing) = 9.6 MB at typical names, 29 MB at the longest Kubernetes allows (253 bytes).
# gRPC's default of 4 MiB would leave such a client on its last configuration; 32 MiB takes
# it with margin and still bounds what one message can make the server decode.
MAX_RECEIVE_MESSAGE_BYTES = 32 * MIB


@dataclass(frozen=True, slots=True)
class XdsLimits:
    """Bounds per connection, per stream and for the server as a whole."""

    max_receive_message_bytes: int = MAX_RECEIVE_MESSAGE_BYTES
    # Envoy opens one ADS stream, or five per-type ones; a proxyless client one. Each open
    # stream may make gRPC buffer a flow-control window (64 KiB) of requests.
    max_streams_per_connection: int = 256
    # Connections open at once on the xDS port, in their handshakes or not (None: no bound).
    # Beyond it gRPC closes a new connection as soon as it is accepted, before its handshake:
    # stalled handshakes cannot take every file descriptor the process has. gRPC counts all
    # connections, so a fleet larger than this needs it raised.
    max_connections: int | None = 5000
    # Streams gRPC has accepted that the server has not taken up yet: it takes one a turn of its
    # event loop, so a reconnect storm queues them. gRPC's own bound cancels new streams at
    # random once 1,000 wait and every one beyond 3,000 (CANCELLED before any answer, and the
    # client retries after its backoff): 10,000 streams opened at once were reopened 44,000
    # times. Each waiting stream holds its call (about 30 KiB with its connection). Never
    # below `max_connections`: every connection allowed opening its stream at once is served.
    max_waiting_streams: int = 10_000
    # How long a stream may wait to be taken up before gRPC cancels it. gRPC's default, 30 s,
    # is shorter than a storm of 10,000 Envoys takes to be taken up on two cores; a stream
    # cancelled then reconnects after its backoff and waits again from the back.
    max_waiting_s: int = 300
    # A connection whose TLS and HTTP/2 handshakes are not done by then is closed, and its
    # file descriptor with it (gRPC's default: 120 s).
    handshake_timeout_s: float = 5.0
    # A connection with no stream open for this long is closed (GOAWAY, then closed): one
    # that finished its handshake and never opens a stream would otherwise hold its file
    # descriptor until its age ends. Envoy keeps its xDS stream open, and retries one that
    # failed within 30 s on the same connection.
    max_connection_idle_s: float = 60.0
    # Connections are closed after this age (None: never), so that clients spread over
    # replicas that came up later; gRPC adds up to 10 % at random. Streams still open get
    # `max_connection_age_grace_s` to end before the connection is cut: an xDS stream never
    # ends on its own (Envoy keeps it through the GOAWAY), so the grace is only what a
    # response being written needs.
    max_connection_age_s: float | None = 30 * 60.0
    max_connection_age_grace_s: float = 10.0
    # Requests a stream may send: a burst of this many is answered at once, then this many
    # per second; requests beyond are read later (back pressure) and a burst of requests
    # waiting is answered once, from the latest of each type.
    request_burst: int = 50
    requests_per_second: float = 20.0
    # Requests read per second per stream before reading pauses (the client then waits on
    # gRPC flow control): what a flooding client costs in decoding.
    reads_per_second: float = 500.0
    # Streams whose first response is being written at one time. A client that never reads
    # holds its slot until it is dropped (`stall_timeout_s`); the others wait for a slot.
    first_responses_in_flight: int = 64
    # A write that has not completed after this long: the client does not read; the stream
    # is closed and its memory given back.
    stall_timeout_s: float = 120.0

    def grpc_options(self) -> list[tuple[str, int]]:
        options = [
            ("grpc.max_receive_message_length", self.max_receive_message_bytes),
            # gRPC grows a stream's receive window to what a fast sender can fill (tens of
            # MB) when it probes the bandwidth-delay product; xDS requests are small, so the
            # fixed default window (64 KiB) bounds what a flooding client makes us buffer.
            ("grpc.http2.bdp_probe", 0),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
            ("grpc.server_handshake_timeout_ms", round(self.handshake_timeout_s * 1000)),
            ("grpc.max_connection_idle_ms", round(self.max_connection_idle_s * 1000)),
        ]
        if self.max_connections is not None:
            options.append(("grpc.max_allowed_incoming_connections", self.max_connections))
        # Equal soft and hard bounds: none is cancelled at random below the bound.
        waiting = max(self.max_waiting_streams, self.max_connections or 0)
        options += [
            ("grpc.server.max_pending_requests", waiting),
            ("grpc.server.max_pending_requests_hard_limit", waiting),
            ("grpc.server_max_unrequested_time_in_server", self.max_waiting_s),
        ]
        if self.max_connection_age_s is not None:
            options += [
                ("grpc.max_connection_age_ms", round(self.max_connection_age_s * 1000)),
                ("grpc.max_connection_age_grace_ms", round(self.max_connection_age_grace_s * 1000)),
            ]
        return options
