"""How DNS settings are spelled, in Service annotations and in the server configuration
alike: the lookup families by name, and a resolver's address."""

from __future__ import annotations

import ipaddress

from dragoman.dag.model import AddressFamily, LookupFamily

DNS_PORT = 53

# Annotation values to Envoy's DnsLookupFamily names.
LOOKUP_FAMILIES: dict[str, LookupFamily] = {
    "v4": "V4_ONLY",
    "v6": "V6_ONLY",
    "v4-preferred": "V4_PREFERRED",
    "all": "ALL",
}
# The family a logical cluster's host tries first (Happy Eyeballs), and how many of its
# addresses at most before one of the other family.
FIRST_FAMILIES: dict[str, AddressFamily] = {"v4": "V4", "v6": "V6"}
MAX_FIRST_FAMILY_COUNT = 64


def parse_resolver(text: str) -> tuple[str, int] | None:
    """`ip`, `ip:port`, `[ipv6]:port` or a bare IPv6 address; None if not one of those."""
    value = text.strip()
    host, port = value, DNS_PORT
    if value.startswith("["):
        inside, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        host = inside
        if rest:
            if not rest[1:].isdigit():
                return None
            port = int(rest[1:])
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
        if not port_text.isdigit():
            return None
        port = int(port_text)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if value.startswith("[") and address.version != 6:
        return None
    return (str(address), port) if 0 < port < 65536 else None
