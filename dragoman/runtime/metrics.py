"""dragoman's Prometheus metrics: one registry per process (one per server in tests).

Events are counted through small hooks the layers already offer (the controller's
`observers`, the xDS server's `XdsCallbacks`, the DNS check loop's timing, the status
writer's results, the informers' restarts); everything that is a count of what is served
now (objects, invalid objects, clients, external names, leadership) is computed when
scraped, so the hot paths pay nothing for it. Labels are bounded: kinds, xDS types,
client kinds and fixed states, never a node or a resource.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

import dragoman
from dragoman.dag.model import Dag
from dragoman.runtime.certificate_expiry import CertificateExpiry, dag_expiries, soonest
from dragoman.runtime.controller import Controller, UpdateResult
from dragoman.runtime.summary import (
    EXTERNAL_NAME_STATES,
    client_counts,
    external_name_states,
    invalid_counts,
    object_counts,
)
from dragoman.snapshots.resources import SHORT_NAMES
from dragoman.xds.protocol.events import Ack, Nack, StreamEvent
from dragoman.xds.protocol.wire import DeltaResponse, Response, SotwResponse
from dragoman.xds.server.stream_loop import XdsCallbacks
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry

# Builds take milliseconds to seconds; propagation to clients up to tens of seconds.
BUILD_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DNS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CLIENT_KINDS = ("envoy", "grpc")

# No `_created` series beside every counter and histogram: twice the samples for a timestamp
# Prometheus does not use. (prometheus_client does not type it.)
disable_created_metrics()  # type: ignore[no-untyped-call]


def type_label(type_url: str) -> str:
    """CDS, EDS, LDS, RDS, or "other": never the raw type URL a client chose to send."""
    return SHORT_NAMES.get(type_url, "other")


@dataclass
class ServedState:
    """Where the scrape-time gauges read from; set by the runtime once it has them."""

    controller: Controller | None = None
    streams: StreamRegistry | None = None
    # `kind/ns/name` of objects the source could not read (manifest mode).
    unreadable: Callable[[], Iterable[str]] = field(default=lambda: ())
    # Manifest files that cannot be read now (manifest mode; None: no gauge).
    unreadable_files: Callable[[], Collection[str]] | None = None
    # Kubernetes mode: whether this replica leads (None: no leader election, no gauge).
    leading: Callable[[], bool] | None = None
    # Kubernetes mode: each watched kind, and whether the API server has stopped serving it
    # (404) since it was listed, its last state kept (None: not Kubernetes mode, no gauge).
    kinds_not_served: Callable[[], dict[str, bool]] | None = None
    # With mutual TLS: the xDS server's certificate and client CAs as the next handshake
    # uses them (None: plaintext).
    xds_certificates: Callable[[], Iterable[CertificateExpiry]] | None = None


class Metrics:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self.state = ServedState()
        self._clock = clock
        registry = self.registry
        build_info = Gauge(
            "dragoman_build_info", "dragoman's version; always 1", ["version"], registry=registry
        )
        build_info.labels(dragoman.__version__).set(1)
        self.builds = Counter(
            "dragoman_builds",
            "Configuration builds published, by kind: full, or endpoints (the EDS fast path)",
            ["kind"],
            registry=registry,
        )
        self.build_seconds = Histogram(
            "dragoman_build_duration_seconds",
            "Time to build and translate a configuration, by kind",
            ["kind"],
            buckets=BUILD_BUCKETS,
            registry=registry,
        )
        self._add_xds_metrics(registry)
        self.dns_check_seconds = Histogram(
            "dragoman_dns_check_duration_seconds",
            "Time of one DNS check round (the names due)",
            buckets=DNS_BUCKETS,
            registry=registry,
        )
        self._add_kubernetes_metrics(registry)
        registry.register(_ServedCollector(self.state))
        for kind in ("full", "endpoints"):
            self.builds.labels(kind)
            self.build_seconds.labels(kind)
        # Children bound once: the per-response hook costs one dict lookup and an increment.
        self._responses = {t: self.responses.labels(t) for t in (*SHORT_NAMES.values(), "other")}
        self._nacks = {t: self.nacks.labels(t) for t in self._responses}
        self._acks = {t: self.ack_seconds.labels(t) for t in self._responses}
        self._published = clock()
        # Per open stream and type: the nonce of the last response and when what it carries
        # became due (publication, or the request that asked for it).
        self._pending: dict[tuple[int, str], tuple[str, float]] = {}
        self._opened: dict[int, float] = {}

    def _add_xds_metrics(self, registry: CollectorRegistry) -> None:
        self.responses = Counter(
            "dragoman_xds_responses",
            "xDS responses sent, by type",
            ["type"],
            registry=registry,
        )
        self.nacks = Counter(
            "dragoman_xds_nacks",
            "xDS responses clients rejected (NACKs), by type",
            ["type"],
            registry=registry,
        )
        self.ack_seconds = Histogram(
            "dragoman_xds_ack_latency_seconds",
            "From a configuration's publication (or the client's request, for a client that "
            "connected later) until the client ACKed it, by type",
            ["type"],
            buckets=ACK_BUCKETS,
            registry=registry,
        )
        self.requests_merged = Counter(
            "dragoman_xds_requests_merged",
            "xDS requests answered as part of a later request of their burst, not on their own "
            "(a client sending faster than its stream's request rate)",
            registry=registry,
        )
        self.streams_stalled = Counter(
            "dragoman_xds_streams_stalled",
            "xDS streams closed because their client read nothing for the stall timeout",
            registry=registry,
        )

    def _add_kubernetes_metrics(self, registry: CollectorRegistry) -> None:
        self.status_writes = Counter(
            "dragoman_status_writes",
            "Status writes to the Kubernetes API, by result: written, unchanged, conflict, failed",
            ["result"],
            registry=registry,
        )
        self.watch_restarts = Counter(
            "dragoman_watch_restarts",
            "Kubernetes watches that ended and were started again, by kind",
            ["kind"],
            registry=registry,
        )
        self.watch_silences = Counter(
            "dragoman_watch_silences",
            "Kubernetes watches on which nothing arrived for the silence limit (not even a "
            "bookmark), taken for dead and started again, by kind",
            ["kind"],
            registry=registry,
        )

    # ------------------------------------------------------------- hooks

    def built(self, result: UpdateResult) -> None:
        """A controller observer: called for every build that published something."""
        if result.kind in ("full", "endpoints"):
            self.builds.labels(result.kind).inc()
            self.build_seconds.labels(result.kind).observe(result.seconds)
        self._published = self._clock()

    def xds_callbacks(self) -> XdsCallbacks:
        return XdsCallbacks(
            on_open=self._opened_stream,
            on_close=self._closed_stream,
            on_event=self._stream_event,
            on_response=self._sent,
            on_merged=lambda _stream, count: self.requests_merged.inc(count),
            on_stalled=lambda _stream: self.streams_stalled.inc(),
        )

    def _opened_stream(self, stream: ConnectedStream) -> None:
        self._opened[stream.stream_id] = self._clock()

    def _closed_stream(self, stream: ConnectedStream) -> None:
        self._opened.pop(stream.stream_id, None)
        for key in [k for k in self._pending if k[0] == stream.stream_id]:
            del self._pending[key]

    def _sent(self, stream: ConnectedStream, response: Response) -> None:
        label = type_label(response.type_url)
        self._responses[label].inc()
        if isinstance(response, SotwResponse | DeltaResponse):
            due = max(self._published, self._opened.get(stream.stream_id, self._published))
            self._pending[(stream.stream_id, response.type_url)] = (response.nonce, due)

    def _stream_event(self, stream: ConnectedStream, event: StreamEvent) -> None:
        if isinstance(event, Nack):
            self._nacks[type_label(event.type_url)].inc()
            self._pending.pop((stream.stream_id, event.type_url), None)
        elif isinstance(event, Ack):
            pending = self._pending.get((stream.stream_id, event.type_url))
            if pending is not None and pending[0] == event.nonce:
                del self._pending[(stream.stream_id, event.type_url)]
                self._acks[type_label(event.type_url)].observe(self._clock() - pending[1])

    def dns_checked(self, seconds: float) -> None:
        self.dns_check_seconds.observe(seconds)

    def status_written(self, written: int, unchanged: int, conflicts: int, failed: int) -> None:
        for result, count in (
            ("written", written),
            ("unchanged", unchanged),
            ("conflict", conflicts),
            ("failed", failed),
        ):
            if count:
                self.status_writes.labels(result).inc(count)

    def watch_restarted(self, kind: str) -> None:
        self.watch_restarts.labels(kind).inc()

    def watch_silent(self, kind: str) -> None:
        self.watch_silences.labels(kind).inc()

    # ------------------------------------------------------------ output

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)


class _ServedCollector(Collector):
    """Gauges over what is served now, computed at scrape time."""

    def __init__(self, state: ServedState) -> None:
        self.state = state

    def describe(self) -> Iterator[Metric]:
        return iter(())  # computed at scrape time only: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        state = self.state
        controller = state.controller
        store = controller.store if controller is not None else None
        dag = controller.dag if controller is not None else None
        objects = GaugeMetricFamily(
            "dragoman_objects", "Objects dragoman holds, by kind", labels=["kind"]
        )
        for kind, count in sorted(object_counts(store).items()):
            objects.add_metric([kind], count)
        yield objects
        invalid = GaugeMetricFamily(
            "dragoman_invalid_objects",
            "Objects that are invalid, refused or have a problem (see their status), by kind",
            labels=["kind"],
        )
        for kind, count in sorted(invalid_counts(dag, state.unreadable()).items()):
            invalid.add_metric([kind], count)
        yield invalid
        if state.unreadable_files is not None:
            yield GaugeMetricFamily(
                "dragoman_manifest_files_unreadable",
                "Manifest files that cannot be read (each serves its last good version)",
                value=len(state.unreadable_files()),
            )
        clients = GaugeMetricFamily(
            "dragoman_xds_clients",
            "Connected xDS clients, by kind: envoy, or grpc (proxyless)",
            labels=["client"],
        )
        counts = client_counts(state.streams.streams() if state.streams is not None else ())
        for kind in CLIENT_KINDS:
            clients.add_metric([kind], counts.get(kind, 0))
        yield clients
        names = GaugeMetricFamily(
            "dragoman_external_names",
            "ExternalName Services, by state: served, refused (by rule or policy), "
            "dns_failed (the DNS check found no address)",
            labels=["state"],
        )
        states: dict[str, int] = dict.fromkeys(EXTERNAL_NAME_STATES, 0)
        if controller is not None:
            found = external_name_states(store, dag, controller.build_options, controller.dns)
            for value in found.values():
                states[value] += 1
        for name, count in states.items():
            names.add_metric([name], count)
        yield names
        yield from _expiry_metrics(state, dag)
        if state.kinds_not_served is not None:
            not_served = GaugeMetricFamily(
                "dragoman_kind_not_served",
                "1 while the API server answers 404 for a kind it served (its last state is "
                "kept until it is served again), by kind",
                labels=["kind"],
            )
            for kind, missing in sorted(state.kinds_not_served().items()):
                not_served.add_metric([kind], 1 if missing else 0)
            yield not_served
        if state.leading is not None:
            yield GaugeMetricFamily(
                "dragoman_leader",
                "1 while this replica is the elected leader (the one writing status)",
                value=1 if state.leading() else 0,
            )


def _expiry_metrics(state: ServedState, dag: Dag | None) -> Iterator[Metric]:
    """One series per certificate dragoman serves or uses (as many as the Secrets its
    configuration names: bounded by the configuration, as `dragoman_objects` is), and the
    soonest of them, which an alert watches."""
    expiries = dag_expiries(dag)
    if state.xds_certificates is not None:
        expiries += state.xds_certificates()
    each = GaugeMetricFamily(
        "dragoman_certificate_expiry_timestamp_seconds",
        "When a certificate dragoman serves or uses expires (its chain's first to expire), "
        "Unix seconds, by kind: xds_server, xds_client_ca, gateway_listener, gateway_client_ca, "
        "backend_client, backend_ca; name: a Secret's namespace/name, a Gateway's "
        "namespace/name/port, a BackendTLSPolicy's (or XBackend's) kind/namespace/name, a "
        "file, or a CA's subject",
        labels=["kind", "name"],
    )
    for expiry in sorted(expiries):
        each.add_metric([expiry.kind, expiry.name], expiry.not_after)
    yield each
    first = soonest(expiries)
    if first is not None:
        yield GaugeMetricFamily(
            "dragoman_certificate_soonest_expiry_timestamp_seconds",
            "When the first of the certificates dragoman serves or uses expires, Unix seconds",
            value=first,
        )
