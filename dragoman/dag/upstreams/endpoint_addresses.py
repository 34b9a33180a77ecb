"""Which EndpointSlice addresses may become endpoints. Pure.

The API server refuses loopback, link-local and unspecified endpoint addresses; a
hand-written slice in a manifest directory, or one behind an ExternalName alias, never met
it. dragoman applies the same rule to every slice it reads, with the cloud-metadata
addresses added: such an address is reported on the slice and dropped, so no route reaches
Envoy's admin port, the node's own services or the instance's credentials through it.

`allowed` lists exceptions (the server configuration's `endpoints.allowedNetworks`): a lab
or a demo whose pods are processes on 127.0.0.x. Each exception must lie inside one of the
always-denied ranges; an address inside one is used.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from dragoman.dag.external_name_policy import BUILTIN_DENIED_NETWORKS, Network
from dragoman.dag.model import Problem
from dragoman.objects import EndpointSlice

DENIED_ENDPOINT_ADDRESS = "DeniedEndpointAddress"

# A dotted-quad IPv4 address exactly as `ipaddress` spells one (0-255, no leading zeros): the
# common case, judged without building an address object (tens of thousands per build).
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}")
_DENIED_V4 = [network for network, _ in BUILTIN_DENIED_NETWORKS if network.version == 4]
# The first octets (as spelled) of every always-denied IPv4 range, all at least /8 wide: an
# address starting otherwise is in none of them.
_DENIED_FIRST_OCTETS = frozenset(str(int(n.network_address) >> 24) for n in _DENIED_V4)
assert all(network.prefixlen >= 8 for network in _DENIED_V4)
# The same ranges as (network, mask) integers.
_DENIED_V4_MASKS = tuple((int(n.network_address), int(n.netmask)) for n in _DENIED_V4)


def endpoint_address_refusal(text: str, allowed: Sequence[Network] = ()) -> str | None:
    """None when `text` may be an endpoint, else why not."""
    if _DOTTED_QUAD.fullmatch(text) is not None:
        if text[: text.index(".")] not in _DENIED_FIRST_OCTETS:
            return None
        a, b, c, d = text.split(".")
        value = (int(a) << 24) | (int(b) << 16) | (int(c) << 8) | int(d)
        if not any(value & mask == network for network, mask in _DENIED_V4_MASKS):
            return None
        # In a denied range: the exceptions and the message come from the full check below.
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return f"{text!r} is not an IP address"
    # An IPv4-mapped IPv6 address reaches the IPv4 host: judge that one.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for network, why in BUILTIN_DENIED_NETWORKS:
        if address in network and not any(
            address in exception for exception in allowed if exception.version == network.version
        ):
            return (
                f"address {text} is in an always-denied range ({why}: {network}); the API "
                "server refuses such endpoint addresses, and dragoman drops them"
            )
    return None


def slice_problems(
    slices: Iterable[EndpointSlice], allowed: Sequence[Network] = ()
) -> list[Problem]:
    """A problem for every address a slice lists that is dropped."""
    problems = []
    for endpoint_slice in slices:
        if endpoint_slice.address_type == "FQDN":
            continue  # never served: Envoy's EDS takes addresses only
        for i, endpoint in enumerate(endpoint_slice.endpoints):
            for j, text in enumerate(endpoint.addresses):
                refusal = endpoint_address_refusal(text, allowed)
                if refusal is not None:
                    problems.append(
                        Problem(
                            endpoint_slice.key,
                            f"endpoints[{i}].addresses[{j}]",
                            DENIED_ENDPOINT_ADDRESS,
                            refusal,
                        )
                    )
    return problems
