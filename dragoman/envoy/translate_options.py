"""Settings the translation applies to every resource it builds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dragoman.dag.model import DEFAULT_LOOKUP_FAMILY, HappyEyeballs

# The values of envoy.extensions.clusters.common.dns.v3.DnsLookupFamily we accept by name.
DNS_LOOKUP_FAMILIES = ("AUTO", "V4_ONLY", "V6_ONLY", "V4_PREFERRED", "ALL")
# Where the resources translated tell Envoy to fetch the resources they name: over ADS, or a
# stream per type (SotW or delta) through the bootstrap's cluster for dragoman.
ConfigSources = Literal["ads", "per-type", "per-type-delta"]
# Gateway listeners' access logs on Envoy's standard output.
AccessLogFormat = Literal["json", "text", "off"]
ACCESS_LOG_FORMATS: tuple[AccessLogFormat, ...] = ("json", "text", "off")
DEFAULT_SYSTEM_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"


@dataclass(frozen=True, slots=True)
class TranslateOptions:
    listener_address: str = "0.0.0.0"
    connect_timeout_s: float = 5.0
    # Defaults follow Envoy Gateway: refresh every 30 s, honour the record's TTL, prefer IPv4.
    dns_refresh_s: int = 30
    dns_respect_ttl: bool = True
    dns_lookup_family: str = DEFAULT_LOOKUP_FAMILY
    # The shortest interval between a DNS cluster's resolutions (a floor under short TTLs);
    # None: Envoy's own.
    dns_min_refresh_s: float | None = None
    # How a logical DNS cluster's host races its IPv4 and IPv6 addresses (lookup family ALL)
    # when its backend says nothing; None: Envoy's own order.
    dns_happy_eyeballs: HappyEyeballs | None = None
    # The CA bundle Envoy trusts for "system" CAs (TLS to external hosts without a
    # BackendTLSPolicy CA). A path on Envoy's machine: Debian, Ubuntu (the envoyproxy/envoy
    # image) and Alpine keep it here; RHEL-family systems in /etc/pki/tls/certs/ca-bundle.crt.
    system_ca_file: str = DEFAULT_SYSTEM_CA_FILE
    # The name per-type clients' bootstraps give their cluster for dragoman: the EDS and RDS
    # config sources served to them name it (`serve --xds-cluster-name`).
    xds_cluster_name: str = "dragoman-xds"
    # The config source of EDS, RDS and SDS in clusters and listeners: "ads" for what is
    # translated once per change; the per-type variants are translated from the same values.
    config_sources: ConfigSources = "ads"
    # Gateway listeners' access logs on Envoy's standard output: "json", "text" or "off".
    access_log: AccessLogFormat = "json"

    def __post_init__(self) -> None:
        # Fail when the options are made, not when Envoy NACKs the first cluster.
        if self.connect_timeout_s <= 0:
            raise ValueError(f"connect_timeout_s must be positive, got {self.connect_timeout_s}")
        if self.dns_refresh_s < 1:
            raise ValueError(f"dns_refresh_s must be at least 1, got {self.dns_refresh_s}")
        if not self.system_ca_file.startswith("/"):
            raise ValueError(
                f"system_ca_file must be an absolute path, got {self.system_ca_file!r}"
            )
        if self.access_log not in ACCESS_LOG_FORMATS:
            raise ValueError(f"access_log must be json, text or off, got {self.access_log!r}")
        if self.dns_lookup_family not in DNS_LOOKUP_FAMILIES:
            raise ValueError(
                f"dns_lookup_family must be one of {', '.join(DNS_LOOKUP_FAMILIES)}, "
                f"got {self.dns_lookup_family!r}"
            )


DEFAULT_OPTIONS = TranslateOptions()
