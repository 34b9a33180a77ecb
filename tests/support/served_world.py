"""A small served world for the operations tests (metrics, health, the debug page), made
with `tests.support.builders`: a Gateway with routes to a pod-backed Service and to two
ExternalNames, its endpoints, and a bounded wait."""

from __future__ import annotations

import asyncio
import time

from tests.support.builders import (
    backend_ref,
    endpoint_slice,
    external_service,
    gateway,
    http_route,
    match,
    rule,
    service,
    yaml_text,
)

GATEWAY = yaml_text(
    gateway("edge", 8080),
    http_route(
        "shop",
        rules=[
            rule(backend_ref("partner", 443), matches=[match("/api")]),
            rule(backend_ref("sneaky", 80), matches=[match("/local")]),
            rule(backend_ref("web", 80)),
        ],
        parents=["edge"],
    ),
)
SERVICES = yaml_text(
    service("web", 80, 8080),
    external_service("partner", "api.partner.example"),
    external_service("sneaky", "localhost", 80),
)


def endpoints(*addresses: str) -> str:
    return yaml_text(endpoint_slice("web", 8080, *addresses))


async def until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
