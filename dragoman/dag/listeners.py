"""Which Gateway listeners this build serves, and problems for those it cannot."""

from __future__ import annotations

from dragoman.dag.model import Problem
from dragoman.objects import Gateway, GatewayListener

SUPPORTED_PROTOCOLS = frozenset({"HTTP"})


def is_served(listener: GatewayListener) -> bool:
    return listener.protocol in SUPPORTED_PROTOCOLS


def served_ports(gateway: Gateway) -> set[int]:
    return {listener.port for listener in gateway.listeners if is_served(listener)}


def listener_name(port: int) -> str:
    """The Envoy listener, and its route table, for one port: listeners on a port share both."""
    return f"http-{port}"


def listener_problems(gateway: Gateway) -> list[Problem]:
    return [
        Problem(
            object=gateway.key,
            field=f"spec.listeners[{index}].protocol",
            reason="UnsupportedProtocol",
            message=(
                f"listener {listener.name!r} uses protocol {listener.protocol!r}; "
                f"only {', '.join(sorted(SUPPORTED_PROTOCOLS))} is supported"
            ),
        )
        for index, listener in enumerate(gateway.listeners)
        if not is_served(listener)
    ]
