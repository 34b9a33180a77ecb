"""Starting to serve, the same for a manifest directory and for Kubernetes:

    controller = serving_controller(build_options, translate_options)
    controller.update(store)  # the first build, before any client is answered
    server, checking = await start_serving(controller, xds_address, dns_check, stop)

then feed `controller.update` as the source changes, until a signal sets `stop`
(`run_until_signalled`). Each mode adds its own around this: the manifest directory watch
(`runtime.manifest_serving`), informers, leader election and the status writer
(`kubernetes.runtime`).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from dragoman.dag.options import BuildOptions
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.runtime.certificate_expiry import xds_expiries
from dragoman.runtime.controller import Controller, UpdateResult
from dragoman.runtime.server_config import DnsCheckSettings
from dragoman.security.files import TlsFiles
from dragoman.xds.server.grpc_server import start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from dragoman.xds.transport.credentials import RotatingServerCredentials

if TYPE_CHECKING:
    from dragoman.runtime.dns_checker import AcceptedAnswer
    from dragoman.runtime.metrics import Metrics


def serving_controller(
    build_options: BuildOptions, translate_options: TranslateOptions
) -> Controller:
    """A controller publishing into a snapshot cache of its own, which serves ADS and
    per-type clients alike."""
    # Per-type clients fetch EDS and RDS through their bootstrap's cluster for dragoman.
    cache = SnapshotCache(per_type=PerTypeConfigSources(translate_options.xds_cluster_name))
    return Controller(cache, build_options, translate_options)


async def start_serving(
    controller: Controller,
    xds_address: str,
    dns_check: DnsCheckSettings,
    stop: asyncio.Event,
    on_dns_update: Callable[[UpdateResult], None] | None = None,
    metrics: Metrics | None = None,
    streams: StreamRegistry | None = None,
    *,
    xds_tls: TlsFiles | None = None,
    xds_insecure: bool = False,
    xds_limits: XdsLimits | None = None,
    dns_answers: Mapping[str, AcceptedAnswer] | None = None,
    on_dns_answers: Callable[[Mapping[str, AcceptedAnswer]], None] | None = None,
) -> tuple[Any, asyncio.Task[None] | None]:
    """Starts the xDS server for a controller that has built once, and the DNS check loop
    (until `stop`) when the configuration turns it on. Returns the server and the check
    loop's task (None: no check). `metrics` counts what the server and the check do;
    `streams` records the connected streams.

    `xds_tls`: serve over mutual TLS with these files (TlsFileError if they cannot be used);
    without, plaintext on loopback only unless `xds_insecure`. `xds_limits`: what one client
    may make the server hold or do (connection age, stall timeout, ...).

    xDS is served at once: names the check has no answer for yet are `DNSCheckPending`
    until their first check, which starts right away (bounded in flight, so hundreds of
    names behind a dead resolver delay no one). `dns_answers`: what a previous process
    accepted (the controller built with them), served until the checks say otherwise;
    `on_dns_answers` is told the accepted answers as they change (to keep them).
    """
    credentials = RotatingServerCredentials(xds_tls) if xds_tls is not None else None
    if credentials is not None and metrics is not None:
        files, material = credentials.files, credentials.material
        metrics.state.xds_certificates = lambda: xds_expiries(files, material())
    checks = None
    if dns_check.enabled:
        from dragoman.runtime.dns_checker import DnsChecker, DnsCheckLoop

        checker = DnsChecker(
            dns_check,
            on_round=metrics.dns_checked if metrics else None,
            policy=controller.build_options.external_names,
        )
        checker.restore(dns_answers or {})
        checks = DnsCheckLoop(controller, checker, on_dns_update, on_dns_answers)
    server = await start_xds_server(
        controller.cache,
        xds_address,
        registry=streams,
        callbacks=metrics.xds_callbacks() if metrics is not None else None,
        tls=credentials,
        insecure=xds_insecure,
        limits=xds_limits,
    )
    return server, asyncio.create_task(checks.run(stop)) if checks is not None else None


async def run_until_signalled(run: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Runs `run(stop)`, with `stop` set by SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await run(stop)
