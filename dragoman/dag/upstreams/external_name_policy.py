"""The platform's policy for ExternalName targets: which external domains may be reached, and
which addresses a name may resolve to (checked when the DNS check is on). Pure values.

Domains: an entry `example.com` covers the name itself and every name below it; `*.example.com`
only the names below it. A denied entry wins over an allowed one; an empty allowlist allows
every domain not denied.

Addresses: loopback, link-local (169.254.169.254 included), unspecified, "this network" and
cloud-metadata addresses are always denied, as are configured `denied_networks`. A configured
`allowed_networks` entry that lies inside one of those built-in ranges makes an exception (a
lab or test resolving names to 127.0.0.x); a broad entry such as 0.0.0.0/0 does not. When
`allowed_networks` is set, every address must be inside one of its entries.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# (range, why), checked in this order so the message names the most specific reason.
BUILTIN_DENIED_NETWORKS: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(cidr), why)
    for cidr, why in (
        ("169.254.169.254/32", "cloud metadata"),
        ("fd00:ec2::254/128", "cloud metadata"),
        ("100.100.100.200/32", "cloud metadata"),
        ("192.0.0.192/32", "cloud metadata"),
        ("127.0.0.0/8", "loopback"),
        ("::1/128", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("fe80::/10", "link-local"),
        ("0.0.0.0/8", "unspecified or 'this network'"),
        ("::/128", "unspecified"),
    )
)


@dataclass(frozen=True, slots=True)
class DomainRule:
    """One allowedDomains or deniedDomains entry."""

    text: str  # as configured, for messages
    suffix: str  # normalised, without "*."
    subdomains_only: bool

    def covers(self, hostname: str) -> bool:
        if hostname.endswith("." + self.suffix):
            return True
        return not self.subdomains_only and hostname == self.suffix


def domain_rule(entry: str) -> DomainRule:
    text = entry.strip()
    name = text.lower().rstrip(".")
    wildcard = name.startswith("*.")
    return DomainRule(text=text, suffix=name[2:] if wildcard else name, subdomains_only=wildcard)


@dataclass(frozen=True, slots=True)
class ExternalNamePolicy:
    allowed_domains: tuple[DomainRule, ...] = ()
    denied_domains: tuple[DomainRule, ...] = ()
    allowed_networks: tuple[Network, ...] = ()
    denied_networks: tuple[Network, ...] = ()
    # Where the rules came from, for messages only (the configuration file's path).
    source: str = field(default="the server configuration", compare=False)

    def domain_refusal(self, hostname: str) -> str | None:
        """None when `hostname` (normalised) may be reached, else which rule refuses it."""
        for rule in self.denied_domains:
            if rule.covers(hostname):
                return (
                    f"externalName {hostname!r} matches the denied domain {rule.text!r} "
                    f"(externalNames.deniedDomains in {self.source})"
                )
        if self.allowed_domains and not any(r.covers(hostname) for r in self.allowed_domains):
            listed = ", ".join(repr(r.text) for r in self.allowed_domains)
            return (
                f"externalName {hostname!r} is not inside an allowed domain "
                f"(externalNames.allowedDomains in {self.source}: {listed})"
            )
        return None

    def address_refusal(self, hostname: str, addresses: Iterable[str]) -> str | None:
        """None when every address `hostname` resolved to may be reached, else which rule
        refuses the first that may not."""
        for text in addresses:
            reason = self._address_reason(ipaddress.ip_address(text))
            if reason is not None:
                return f"externalName {hostname!r} resolves to {text}, {reason}"
        return None

    def _address_reason(self, address: Address) -> str | None:
        # An IPv4-mapped IPv6 address reaches the IPv4 host: judge that one.
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        for network in self.denied_networks:
            if address in network:
                return (
                    f"inside the denied range {network} "
                    f"(externalNames.deniedNetworks in {self.source})"
                )
        for network, why in BUILTIN_DENIED_NETWORKS:
            if address in network and not any(
                address in allowed and allowed.subnet_of(network)  # type: ignore[arg-type]
                for allowed in self.allowed_networks
                if allowed.version == network.version
            ):
                return f"a {why} address (always denied, range {network})"
        if self.allowed_networks and not any(address in n for n in self.allowed_networks):
            listed = ", ".join(str(n) for n in self.allowed_networks)
            return (
                f"outside every allowed range (externalNames.allowedNetworks in "
                f"{self.source}: {listed})"
            )
        return None


NO_POLICY = ExternalNamePolicy()
