"""Which ExternalName targets are safe to hand to Envoy's DNS resolver, and which are aliases.

Checks only the literal name: what a public name resolves to is not known here.
"""

from __future__ import annotations

import ipaddress
import re

from dragoman.dag.external_name_policy import CLOUD_METADATA_ADDRESSES

_MAX_NAME_LENGTH = 253
_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
# Every dot-separated label an RFC 1123 label, in one match.
_LABELS = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")

# Names that /etc/hosts or the resolver itself maps to the loopback interface.
_LOCALHOST_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "localhost4.localdomain4", "localhost6.localdomain6"}
)

_METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in CLOUD_METADATA_ADDRESSES)

# Names of instance metadata services (they hand out credentials), which resolve to one of
# the addresses above only inside the cloud: refused by name, so that even without the DNS
# check (which would refuse the address) Envoy never gets a cluster for one. Each entry
# names its source. Azure, Oracle, Alibaba, DigitalOcean, Hetzner and OpenStack document
# their services by address only (see CLOUD_METADATA_ADDRESSES).
_METADATA_NAMES = {
    # https://cloud.google.com/compute/docs/metadata/overview (metadata.google.internal)
    "metadata.google.internal": "Google Cloud",
    # Google's short alias of the same server; not on that page, but answered on Compute
    # Engine and listed by SSRF guards: refused as a precaution.
    "metadata.goog": "Google Cloud",
    # https://cloud.ibm.com/apidocs/vpc-metadata: "the service's hostname
    # api.metadata.cloud.ibm.com" (the only name for HTTPS access).
    "api.metadata.cloud.ibm.com": "IBM Cloud",
    # https://www.tencentcloud.com/document/product/213/4934 (metadata.tencentyun.com)
    "metadata.tencentyun.com": "Tencent Cloud",
    # AWS: the Amazon-provided DNS server answers instance-data.ec2.internal (and, below,
    # instance-data.<region>.compute.internal) with 169.254.169.254; older EC2 guides used
    # http://instance-data/latest/meta-data/. Not on the current IMDS page: a precaution.
    "instance-data.ec2.internal": "AWS",
}
_METADATA_PATTERNS = ((re.compile(r"instance-data\.[a-z0-9-]+\.compute\.internal"), "AWS"),)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Without a colon a name can only be an IPv4 literal, made of ASCII digits and dots alone.
_NOT_IPV4 = re.compile(r"[^0-9.]")


def normalise(external_name: str) -> str:
    """Lower-case, without one trailing dot: the form DNS compares and clusters are named by."""
    stripped = external_name.strip()
    name = stripped.lower()
    if name == stripped:
        name = stripped  # the Service's own string: ten thousand clusters keep no copies
    return name[:-1] if name.endswith(".") else name


def unsafe_reason(external_name: str) -> str | None:
    """None if Envoy may resolve this name itself, else a message saying why not."""
    return normalised_unsafe_reason(normalise(external_name))


def normalised_unsafe_reason(name: str, field: str = "externalName") -> str | None:
    """unsafe_reason of a name already normalised (see normalise); messages name `field`."""
    if not name:
        return f"{field} is empty"
    ip = _ip_literal(name)
    if ip is not None:
        return _ip_reason(name, ip, field)
    if len(name) > _MAX_NAME_LENGTH:
        return f"{field} is longer than {_MAX_NAME_LENGTH} characters"
    labels = name.split(".")
    if _LABELS.fullmatch(name) is None:
        return f"{field} {name!r} is not a valid DNS name (RFC 1123)"
    if name in _LOCALHOST_NAMES or name.endswith(".localhost"):
        return f"{field} {name!r} points to localhost"
    cloud = _metadata_service(name)
    if cloud is not None:
        return (
            f"{field} {name!r} names the {cloud} instance metadata service, which hands "
            "out the machine's credentials"
        )
    if len(labels) == 1:
        # A single label is completed by the resolver's search path: in a pod, an in-cluster name.
        return f"{field} {name!r} is a single-label name; use a fully qualified name"
    if labels[-1].isdigit():
        # No top-level domain is numeric; resolvers read such names as short IPv4 forms (127.1).
        return f"{field} {name!r} looks like an IPv4 address; {_must(field)} be a DNS name"
    return None


def _metadata_service(name: str) -> str | None:
    """The cloud whose metadata service `name` (normalised) names, if it names one."""
    cloud = _METADATA_NAMES.get(name)
    if cloud is None:
        for pattern, pattern_cloud in _METADATA_PATTERNS:
            if pattern.fullmatch(name):
                return pattern_cloud
    return cloud


def in_cluster_target(external_name: str, cluster_domain: str) -> tuple[str, str] | None:
    """(namespace, service) when the name is `<svc>.<ns>.svc[.<cluster_domain>]`, else None."""
    labels = _in_cluster_part(normalise(external_name), normalise(cluster_domain)).split(".")
    if len(labels) == 3 and labels[2] == "svc" and labels[0] and labels[1]:
        return labels[1], labels[0]
    return None


def is_cluster_local(external_name: str, cluster_domain: str) -> bool:
    """True for any name inside the cluster's DNS zone, Service-shaped or not."""
    name = normalise(external_name)
    domain = normalise(cluster_domain)
    in_domain = bool(domain) and (name == domain or name.endswith("." + domain))
    return in_domain or name == "svc" or name.endswith(".svc")


def _in_cluster_part(name: str, domain: str) -> str:
    if domain and name.endswith("." + domain):
        return name[: -len(domain) - 1]
    return name


def _ip_literal(name: str) -> IPAddress | None:
    if ":" not in name and _NOT_IPV4.search(name) is not None:
        return None  # a host name (the common case), known without parsing it twice
    bracketed = name.startswith("[") and name.endswith("]")
    try:
        ip = ipaddress.ip_address(name[1:-1] if bracketed else name)
    except ValueError:
        return None
    if bracketed and ip.version != 6:
        return None
    return ip


def _ip_reason(name: str, ip: IPAddress, field: str) -> str:
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    # An IPv4-mapped IPv6 address reaches the IPv4 host: judge that one.
    target = mapped if mapped is not None else ip
    if target in _METADATA_ADDRESSES:
        return f"{field} {name!r} is a cloud metadata address"
    if target.is_loopback:
        return f"{field} {name!r} is a loopback address"
    if target.is_link_local:
        return f"{field} {name!r} is a link-local address"
    if target.is_unspecified:
        return f"{field} {name!r} is the unspecified address"
    return (
        f"{field} {name!r} is an IP address; {_must(field)} be a DNS name "
        "(use an EndpointSlice for addresses)"
    )


def _must(field: str) -> str:
    """Who must be a DNS name: an ExternalName (as Services' messages always said), or the
    field named."""
    return "an ExternalName must" if field == "externalName" else f"{field} must"
