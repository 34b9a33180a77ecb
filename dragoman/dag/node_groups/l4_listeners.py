"""Listeners that proxy whole connections or datagrams, one Envoy listener per port:

- TCP: every connection to the one TCPRoute served there.
- TLS: one filter chain per route hostname, chosen by the SNI of the ClientHello (the TLS
  inspector reads it); the client's TLS passes through untouched (Passthrough), or is
  terminated with the listener's certificates first (Terminate). Listeners of both modes
  may share a port, each with its own hostnames.
- UDP: datagrams to the one UDPRoute served there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dragoman.dag.frontends.attachment import Attachment
from dragoman.dag.frontends.hostnames import ANY_HOST, covers, owner, specificity
from dragoman.dag.frontends.listeners import ListenerVerdict
from dragoman.dag.model import Backend, L4Forward, TcpFilterChain, TcpListener, UdpListener
from dragoman.dag.routes.l4_rules import L4Rules
from dragoman.objects import ObjectKey


@dataclass(frozen=True, slots=True)
class ServedL4Route:
    """One TCPRoute, TLSRoute or UDPRoute, served where one listener accepted it."""

    attachment: Attachment
    route: ObjectKey
    rules: L4Rules


# (Gateway namespace, Gateway name, listener name) -> the routes served there
L4ByListener = Mapping[tuple[str, str, str], Sequence[ServedL4Route]]


def l4_listener(
    port: int, verdicts: Sequence[ListenerVerdict], by_listener: L4ByListener
) -> TcpListener | UdpListener | None:
    """The Envoy listener of one port; None when no route is served there (nothing to
    proxy to: connections are refused, as they are to any closed port)."""
    protocol = verdicts[0].listener.protocol
    if protocol == "TLS":
        return _tls_listener(port, verdicts, by_listener)
    served = [item for verdict in verdicts for item in _served(verdict, by_listener)]
    if not served:
        return None
    forward = served[0].rules.forward
    if protocol == "UDP":
        return UdpListener(udp_listener_name(port), port, forward)
    name = tcp_listener_name(port)
    return TcpListener(name, port, (TcpFilterChain(name, (), forward),))


def tcp_listener_name(port: int) -> str:
    return f"tcp-{port}"


def tls_listener_name(port: int) -> str:
    return f"tls-{port}"


def udp_listener_name(port: int) -> str:
    return f"udp-{port}"


def _tls_listener(
    port: int, verdicts: Sequence[ListenerVerdict], by_listener: L4ByListener
) -> TcpListener | None:
    name = tls_listener_name(port)
    chains: list[TcpFilterChain] = []
    claimed: set[str] = set()
    hostnames = [v.listener.hostname or ANY_HOST for v in verdicts]
    # The most specific listener hostname first: its hostnames are its own (isolation).
    for verdict in sorted(verdicts, key=lambda v: specificity(v.listener.hostname or ANY_HOST)):
        terminate = verdict.terminates_tls
        own = verdict.listener.hostname or ANY_HOST
        for item in _served(verdict, by_listener):
            # A name a more specific listener of the port matches is that listener's.
            names = [
                d
                for d in item.attachment.domains
                if d not in claimed and owner(d, hostnames) == own
            ]
            if not names:
                continue
            claimed.update(names)
            rules = item.rules
            chains.append(
                TcpFilterChain(
                    name=f"{name}/{verdict.name}/{item.route.namespace}/{item.route.name}",
                    # A route of every host (no hostname anywhere) takes any SNI, or none.
                    server_names=() if ANY_HOST in names else tuple(sorted(names)),
                    forward=rules.forward if terminate else rules.passthrough,
                    certificates=verdict.certificates if terminate else (),
                    client_validation=verdict.client_validation if terminate else None,
                )
            )
    if not chains:
        return None
    # A listener hostname no route serves is still that listener's: its connections are
    # refused rather than taken by a wider name's chain (listener isolation).
    for verdict in verdicts:
        hostname = verdict.listener.hostname
        if hostname and hostname not in claimed and _caught_by_wider(hostname, chains):
            claimed.add(hostname)
            chains.append(
                TcpFilterChain(
                    name=f"{name}/{verdict.name}",
                    server_names=(hostname,),
                    forward=L4Forward((Backend(cluster=None, weight=1),), verdict.gateway),
                )
            )
    # Envoy matches the most specific server name itself; the catch-all chain goes last.
    chains.sort(key=lambda chain: not chain.server_names)
    return TcpListener(name, port, tuple(chains), inspect_tls=True)


def _caught_by_wider(hostname: str, chains: Sequence[TcpFilterChain]) -> bool:
    return any(
        not chain.server_names or any(covers(name, hostname) for name in chain.server_names)
        for chain in chains
    )


def _served(verdict: ListenerVerdict, by_listener: L4ByListener) -> Sequence[ServedL4Route]:
    return by_listener.get((verdict.gateway.namespace, verdict.gateway.name, verdict.name), ())
