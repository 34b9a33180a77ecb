"""EnvoyProxyParameters, listed and watched for `serve --provision` (an informer of their own:
they are provisioning's input, not the build's), so that a change to one re-provisions the
Gateways using it at once. Without the CRD the informer finds nothing, and looks again now
and then, as for every optional kind."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from dragoman.kubernetes.informer import Informer, WatchSettings
from dragoman.kubernetes.watched_kinds import WatchedKind
from dragoman.provisioning.parameters import (
    GROUP,
    KIND,
    VERSION,
    EnvoyProxyParameters,
    parse_parameters,
)

PARAMETERS_KIND = WatchedKind(KIND, GROUP, (VERSION,), "envoyproxyparameters")

ParametersByKey = dict[tuple[str, str], EnvoyProxyParameters]


class ParametersWatch:
    """Every EnvoyProxyParameters of the cluster, parsed, kept current by an informer;
    `on_change` is called on the event loop after each change."""

    def __init__(
        self,
        client: Any,
        settings: WatchSettings,
        loop: asyncio.AbstractEventLoop,
        on_change: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._on_change = on_change
        self._lock = threading.Lock()
        self._parameters: ParametersByKey = {}
        self.informer = Informer(client, PARAMETERS_KIND, (VERSION,), None, self, settings)

    @property
    def synced(self) -> bool:
        """Listed once (or found not served): what `parameters` says is the cluster's."""
        return self.informer.synced.is_set()

    def parameters(self) -> ParametersByKey:
        with self._lock:
            return dict(self._parameters)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()

    # The informer's sink, called from its thread.

    def replace(self, informer: Informer, objects: list[dict[str, Any]]) -> None:
        parsed = (_parsed(obj) for obj in objects)
        with self._lock:
            self._parameters = {(p.namespace, p.name): p for p in parsed}
        self._changed()

    def event(self, informer: Informer, event_type: str, obj: dict[str, Any]) -> None:
        parameters = _parsed(obj)
        with self._lock:
            if event_type == "DELETED":
                self._parameters.pop((parameters.namespace, parameters.name), None)
            else:
                self._parameters[(parameters.namespace, parameters.name)] = parameters
        self._changed()

    def _changed(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            self._loop.call_soon_threadsafe(self._on_change)


def _parsed(obj: dict[str, Any]) -> EnvoyProxyParameters:
    return parse_parameters(obj, (obj.get("metadata") or {}).get("namespace", ""))
