"""`dragoman serve`: watch a manifest directory and serve what it means over xDS."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from dragoman.config import NO_DNS_CHECK, DnsCheckSettings
from dragoman.controller import Controller
from dragoman.dag.options import BuildOptions
from dragoman.envoy.options import TranslateOptions
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import ManifestDirectory
from dragoman.sources.watch import watch_directory
from dragoman.xds.cache import SnapshotCache
from dragoman.xds.server import start_xds_server

log = logging.getLogger("dragoman.serve")


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
        self.cache = SnapshotCache()
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
        update = self.controller.update(result.store())
        for problem in update.new_problems:
            log.warning("%s", problem)
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
        dns_checks = None
        if self.config.dns_check.enabled:
            from dragoman.dns_checker import DnsChecker, DnsCheckLoop

            dns_checks = DnsCheckLoop(self.controller, DnsChecker(self.config.dns_check))
            await dns_checks.check_once()  # serve checked names from the first response on
        server = await start_xds_server(self.cache, self.config.xds_address)
        log.info("serving xDS on %s from %s", self.config.xds_address, self.config.manifests)
        checking = asyncio.create_task(dns_checks.run(stop)) if dns_checks else None
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


async def serve(config: ServeConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await ManifestServer(config).run(stop)
