"""`dragoman serve`: watch a manifest directory and serve what it means over xDS."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.dag.options import BuildOptions
from dragoman.envoy.options import TranslateOptions
from dragoman.envoy.per_type_sources import PerTypeConfigSources
from dragoman.runtime.controller import Controller, UpdateResult
from dragoman.runtime.server_config import NO_DNS_CHECK, DnsCheckSettings
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import ManifestDirectory
from dragoman.sources.watch import watch_directory
from dragoman.store import Store
from dragoman.xds.cache import SnapshotCache
from dragoman.xds.server import start_xds_server

log = logging.getLogger("dragoman.runtime.manifest_serving")


@dataclass(frozen=True, slots=True)
class ServeConfig:
    manifests: Path
    xds_address: str
    build_options: BuildOptions = BuildOptions()
    translate_options: TranslateOptions = TranslateOptions()
    dns_check: DnsCheckSettings = NO_DNS_CHECK


class ManifestServer:
    """Reloads the directory on change and feeds the controller; logs each error once."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.directory = ManifestDirectory(config.manifests)
        self.cache = SnapshotCache(
            per_type=PerTypeConfigSources(config.translate_options.xds_cluster_name)
        )
        # The build uses DNS check results exactly when the check runs.
        build_options = dataclasses.replace(
            config.build_options, dns_check=config.dns_check.enabled
        )
        self.controller = Controller(self.cache, build_options, config.translate_options)
        self._reported: set[SourceError] = set()

    def reload(self) -> None:
        result = self.directory.load()
        errors = set(result.errors)
        for error in sorted(errors - self._reported, key=str):
            log.error("%s", error)
        for error in sorted(self._reported - errors, key=str):
            log.info("resolved: %s", error)
        self._reported = errors
        update = self.controller.update(Store.from_objects(result.objects))
        _log_new_problems(update)
        if update.kind != "unchanged":
            log.info(
                "%s update from %d files, %d objects in %.1f ms (%d errors, %d problems)",
                update.kind,
                result.files,
                len(result.objects),
                update.seconds * 1000,
                len(errors),
                len(update.problems),
            )

    async def run(self, stop: asyncio.Event) -> None:
        self.reload()
        server, checking = await start_serving(
            self.controller,
            self.cache,
            self.config.xds_address,
            self.config.dns_check,
            stop,
            on_dns_update=_log_new_problems,  # a name failing its check is a new problem
        )
        log.info("serving xDS on %s from %s", self.config.xds_address, self.config.manifests)
        try:
            await watch_directory(self.config.manifests, self._on_change, stop)
        finally:
            if checking is not None:
                checking.cancel()
                await asyncio.gather(checking, return_exceptions=True)
            await server.stop(grace=1.0)
            log.info("stopped")

    def _on_change(self) -> None:
        try:
            self.reload()
        except Exception:  # a bug must not stop serving the last good snapshot
            log.exception(
                "reload of %s failed; still serving the previous configuration",
                self.config.manifests,
            )


def _log_new_problems(update: UpdateResult) -> None:
    for problem in update.new_problems:
        log.warning("%s", problem)


async def start_serving(
    controller: Controller,
    snapshots: SnapshotCache,
    xds_address: str,
    dns_check: DnsCheckSettings,
    stop: asyncio.Event,
    on_dns_update: Callable[[UpdateResult], None] | None = None,
) -> tuple[Any, asyncio.Task[None] | None]:
    """Starts the xDS server for a controller that has built once, and the DNS check loop
    (until `stop`) when the configuration turns it on. Returns the server and the check
    loop's task (None: no check)."""
    checks = None
    if dns_check.enabled:
        from dragoman.runtime.dns_checker import DnsChecker, DnsCheckLoop

        policy = controller.build_options.external_names
        checks = DnsCheckLoop(controller, DnsChecker(dns_check, policy=policy), on_dns_update)
        await checks.check_once()  # serve checked names from the first response on
    server = await start_xds_server(snapshots, xds_address)
    return server, asyncio.create_task(checks.run(stop)) if checks is not None else None


async def run_until_signalled(run: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Runs `run(stop)`, with `stop` set by SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await run(stop)


async def serve(config: ServeConfig) -> None:
    await run_until_signalled(ManifestServer(config).run)
