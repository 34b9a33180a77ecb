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

# Instance metadata services: they hand out the machine's (or the pod's) credentials. Each
# entry names the documentation it comes from (reviewed for AWS, Google Cloud, Azure,
# Oracle, Alibaba, IBM, DigitalOcean, Hetzner, OpenStack and Tencent).
CLOUD_METADATA_ADDRESSES: tuple[str, ...] = (
    # AWS, Azure, Google Cloud, Oracle, IBM, DigitalOcean, Hetzner, OpenStack: the common
    # IPv4 address (inside 169.254.0.0/16, denied as link-local as well).
    #   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html
    #   https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service
    #   https://cloud.google.com/compute/docs/metadata/overview
    #   https://docs.oracle.com/iaas/Content/Compute/Tasks/gettingmetadata.htm
    #   https://cloud.ibm.com/apidocs/vpc-metadata
    #   https://docs.digitalocean.com/products/droplets/how-to/access-metadata/
    #   https://docs.hetzner.cloud/ (server metadata, /hetzner/v1/metadata)
    #   https://docs.openstack.org/nova/latest/admin/metadata-service.html
    "169.254.169.254",
    # AWS over IPv6 on Nitro instances ("IPv6 on AWS" whitepaper, supporting VPC services).
    #   https://docs.aws.amazon.com/whitepapers/latest/ipv6-on-aws/supporting-amazon-vpc-services.html
    "fd00:ec2::254",
    # AWS EKS Pod Identity Agent, which hands pods their IAM credentials; its IPv4 address
    # 169.254.170.23 is link-local already.
    #   https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html
    "fd00:ec2::23",
    # Alibaba Cloud ECS metadata service.
    #   https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata
    "100.100.100.200",
    # Azure WireServer: Azure's IMDS documentation says to treat 169.254.169.254 "the same
    # as 168.63.129.16" (it serves the VM agent its configuration).
    #   https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service
    "168.63.129.16",
    # Oracle Cloud Infrastructure Classic's metadata address (kept from earlier lists; not in
    # the current OCI documentation).
    "192.0.0.192",
    # OpenStack Nova over IPv6 (since Victoria) is fe80::a9fe:a9fe: link-local, denied above.
)

# (range, why), checked in this order so the message names the most specific reason.
BUILTIN_DENIED_NETWORKS: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(cidr), why)
    for cidr, why in (
        *((address, "cloud metadata") for address in CLOUD_METADATA_ADDRESSES),
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

    def address_reason(self, text: str) -> str | None:
        """None when the address may be reached, else why not ("a loopback address ...")."""
        return self._address_reason(ipaddress.ip_address(text))

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
            # (subnet_of between networks of one version, which mypy cannot tell.)
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


def exception_problem(network: Network) -> str | None:
    """Why `network` cannot be an endpoints.allowedNetworks entry (None: it can)."""
    # (subnet_of between networks of one version, which mypy cannot tell from the union.)
    if any(
        network.version == denied.version and network.subnet_of(denied)  # type: ignore[arg-type]
        for denied, _ in BUILTIN_DENIED_NETWORKS
    ):
        return None
    ranges = ", ".join(str(denied) for denied, _ in BUILTIN_DENIED_NETWORKS)
    return (
        f"must lie inside one of the always-denied ranges ({ranges}); other addresses "
        "need no exception"
    )
