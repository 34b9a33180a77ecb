"""The server configuration file (`--config FILE`): the platform's ExternalName policy, the
DNS check, DNS defaults and the system CA bundle. YAML, every key optional:

    clusterDomain: cluster.local
    externalNames:
      allowedDomains: [example.com, "*.partner.net"]
      deniedDomains: [internal.example.com]
      allowedNetworks: []
      deniedNetworks: [10.0.0.0/8]
      dnsCheck:
        enabled: true
        resolvers: ["10.96.0.10:53"]
        timeout: 2s
        minInterval: 5s
        maxInterval: 5m
        grace: 30s  # default: the TTL of the last accepted answer
    dnsDefaults: {refreshRate: 30s, respectTTL: true, lookupFamily: v4-preferred}
    upstreamTLS: {systemCABundle: /etc/ssl/certs/ca-certificates.crt}
    endpoints: {allowedNetworks: [127.0.0.0/8]}  # a lab whose pods run on loopback
    accessLog: {format: json, enabled: true}   # Gateway listeners, on Envoy's stdout

A file with problems is refused as a whole, every problem named by its field path, so the
server never starts with half a policy: allowedNetworks and deniedNetworks without the DNS
check (which alone learns the addresses they judge) are such a problem.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dragoman.dag.dns_notation import (
    FIRST_FAMILIES,
    LOOKUP_FAMILIES,
    MAX_FIRST_FAMILY_COUNT,
    parse_resolver,
)
from dragoman.dag.external_name_policy import (
    NO_POLICY,
    ExternalNamePolicy,
    Network,
    domain_rule,
    exception_problem,
)
from dragoman.dag.model import HappyEyeballs
from dragoman.dag.options import BuildOptions
from dragoman.envoy.translate_options import DEFAULT_SYSTEM_CA_FILE, TranslateOptions
from dragoman.objects.durations import DURATION_EXPECTED, parse_duration
from dragoman.sources.decode import DecodeError, decode_documents
from dragoman.sources.errors import FieldProblem
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import DNS1123_SUBDOMAIN

MAX_FILE_BYTES = 1 << 20
# accessLog.format; "off" when accessLog.enabled is false.
AccessLogFormat = Literal["json", "text", "off"]
ACCESS_LOG_FORMATS: tuple[AccessLogFormat, ...] = ("json", "text")
MAX_RULES = 1024


class ConfigError(Exception):
    """Every problem of a configuration file, each naming its field."""

    def __init__(self, path: str, problems: list[FieldProblem]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{path}: {f}: {m}" if f else f"{path}: {m}" for f, m in problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True, slots=True)
class DnsCheckSettings:
    enabled: bool = False
    resolvers: tuple[tuple[str, int], ...] = ()  # (): the system's (/etc/resolv.conf)
    timeout_s: float = 2.0  # per name, both families together
    # Re-check after the answer's TTL, kept within these bounds; failures after min_interval.
    min_interval_s: float = 5.0
    max_interval_s: float = 300.0
    # How long the last accepted addresses stay served once an answer is refused (a rebinding
    # attempt); None: that accepted answer's TTL (clamped as above). Then: no address, 503.
    grace_s: float | None = None


NO_DNS_CHECK = DnsCheckSettings()


@dataclass(frozen=True, slots=True)
class ServerConfig:
    cluster_domain: str = "cluster.local"
    external_names: ExternalNamePolicy = NO_POLICY
    dns_check: DnsCheckSettings = NO_DNS_CHECK
    # dnsDefaults; None keeps TranslateOptions' own default.
    dns_refresh_s: float | None = None
    dns_respect_ttl: bool | None = None
    dns_lookup_family: str | None = None
    dns_min_refresh_s: float | None = None
    dns_happy_eyeballs: HappyEyeballs | None = None
    system_ca_file: str = DEFAULT_SYSTEM_CA_FILE
    # endpoints.allowedNetworks: EndpointSlice addresses in always-denied ranges still used.
    endpoint_networks: tuple[Network, ...] = ()
    access_log: AccessLogFormat = "json"
    source: str = ""  # the file it came from

    def build_options(self, base: BuildOptions = BuildOptions()) -> BuildOptions:
        return dataclasses.replace(
            base,
            cluster_domain=self.cluster_domain,
            external_names=self.external_names,
            dns_check=self.dns_check.enabled,
            endpoint_networks=self.endpoint_networks,
            dns_lookup_family=self.dns_lookup_family or base.dns_lookup_family,
        )

    def translate_options(self, base: TranslateOptions = TranslateOptions()) -> TranslateOptions:
        changes: dict[str, Any] = {
            "system_ca_file": self.system_ca_file,
            "access_log": self.access_log,
        }
        if self.dns_refresh_s is not None:
            changes["dns_refresh_s"] = self.dns_refresh_s
        if self.dns_respect_ttl is not None:
            changes["dns_respect_ttl"] = self.dns_respect_ttl
        if self.dns_lookup_family is not None:
            changes["dns_lookup_family"] = self.dns_lookup_family
        if self.dns_min_refresh_s is not None:
            changes["dns_min_refresh_s"] = self.dns_min_refresh_s
        if self.dns_happy_eyeballs is not None:
            changes["dns_happy_eyeballs"] = self.dns_happy_eyeballs
        return dataclasses.replace(base, **changes)


DEFAULT_CONFIG = ServerConfig()


def load_config(path: Path) -> ServerConfig:
    """Read and check a configuration file; raises ConfigError naming every problem."""
    name = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(name, [("", f"cannot be read: {error.strerror or error}")]) from error
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(name, [("", f"is larger than {MAX_FILE_BYTES} bytes")])
    try:
        # The manifests' bounded decoder: nesting, aliases and integers are limited here too.
        documents = decode_documents(raw, is_json=False) if raw.strip() else [{}]
    except DecodeError as error:
        raise ConfigError(name, [("", f"is not valid YAML: {error}")]) from error
    if len(documents) > 1:
        raise ConfigError(name, [("", "holds more than one YAML document")])
    document = documents[0] if documents else {}
    config = parse_config(document, name)
    check = config.dns_check
    if check.enabled and not check.resolvers and not _system_resolvers():
        raise ConfigError(
            name,
            [
                (
                    "externalNames.dnsCheck.resolvers",
                    "is empty, and this machine has no resolver configuration "
                    "(/etc/resolv.conf) to use instead",
                )
            ],
        )
    return config


def _system_resolvers() -> bool:
    """Whether the system's resolver configuration names at least one server."""
    import dns.resolver

    try:
        return bool(dns.resolver.Resolver().nameservers)
    except dns.resolver.NoResolverConfiguration:
        return False


def parse_config(document: Any, source: str = "the configuration") -> ServerConfig:
    problems: list[FieldProblem] = []
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, [("", f"expected a mapping, got {describe(document)}")])
    root = Node(document, "", problems)
    _only_keys(
        root,
        ("clusterDomain", "externalNames", "dnsDefaults", "upstreamTLS", "accessLog", "endpoints"),
    )
    cluster_domain = root.string("clusterDomain", default="cluster.local", format=DNS1123_SUBDOMAIN)
    policy, dns_check = _external_names(root.mapping("externalNames"), source)
    config = ServerConfig(
        cluster_domain=cluster_domain,
        external_names=policy,
        dns_check=dns_check,
        system_ca_file=_system_ca_file(root.mapping("upstreamTLS")),
        endpoint_networks=_endpoint_networks(root.mapping("endpoints")),
        access_log=_access_log(root.mapping("accessLog")),
        source=source,
    )
    defaults = root.mapping("dnsDefaults")
    if defaults is not None:
        config = _dns_defaults(defaults, config)
    if problems:
        raise ConfigError(source, problems)
    return config


def _endpoint_networks(node: Node | None) -> tuple[Network, ...]:
    if node is None:
        return ()
    _only_keys(node, ("allowedNetworks",))
    networks = _networks(node, "allowedNetworks")
    for index, network in enumerate(networks):
        problem = exception_problem(network)
        if problem is not None:
            node.report(f"{node.at('allowedNetworks')}[{index}]", f"{network}: {problem}")
    return networks


def _only_keys(node: Node, known: tuple[str, ...]) -> None:
    for key in node.data:
        if key not in known:
            node.report(node.at(str(key)), f"unknown setting (known here: {', '.join(known)})")


def _external_names(node: Node | None, source: str) -> tuple[ExternalNamePolicy, DnsCheckSettings]:
    if node is None:
        return ExternalNamePolicy(source=source), DnsCheckSettings()
    _only_keys(
        node, ("allowedDomains", "deniedDomains", "allowedNetworks", "deniedNetworks", "dnsCheck")
    )
    policy = ExternalNamePolicy(
        allowed_domains=tuple(domain_rule(d) for d in _domains(node, "allowedDomains")),
        denied_domains=tuple(domain_rule(d) for d in _domains(node, "deniedDomains")),
        allowed_networks=_networks(node, "allowedNetworks"),
        denied_networks=_networks(node, "deniedNetworks"),
        source=source,
    )
    check = node.mapping("dnsCheck")
    settings = _dns_check(check) if check is not None else DnsCheckSettings()
    if not settings.enabled:
        # Addresses are known only once dragoman resolves a name: without the check these
        # rules would look in force and refuse nothing.
        networks = {
            "allowedNetworks": policy.allowed_networks,
            "deniedNetworks": policy.denied_networks,
        }
        for key, parsed in networks.items():
            if parsed:
                node.report(
                    node.at(key),
                    "takes effect only with the DNS check on (externalNames.dnsCheck.enabled: "
                    "true); enable the check or remove this setting",
                )
    return policy, settings


def _domains(node: Node, key: str) -> tuple[str, ...]:
    entries = node.strings(key, max_items=MAX_RULES)
    valid = []
    for index, entry in enumerate(entries):
        name = entry.strip().lower().rstrip(".")
        bare = name.removeprefix("*.")
        if not DNS1123_SUBDOMAIN.accepts(bare):
            node.expected(
                f"{node.at(key)}[{index}]",
                'a domain such as "example.com" or "*.example.com"',
                entry,
            )
        else:
            valid.append(entry)
    return tuple(valid)


def _networks(node: Node, key: str) -> tuple[Network, ...]:
    networks = []
    for index, entry in enumerate(node.strings(key, max_items=MAX_RULES)):
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=True))
        except ValueError as error:
            node.report(f"{node.at(key)}[{index}]", f"expected a CIDR such as 10.0.0.0/8: {error}")
    return tuple(networks)


def _dns_check(node: Node) -> DnsCheckSettings:
    _only_keys(node, ("enabled", "resolvers", "timeout", "minInterval", "maxInterval", "grace"))
    resolvers = []
    for index, entry in enumerate(node.strings("resolvers", max_items=8)):
        parsed = parse_resolver(entry)
        if parsed is None:
            node.expected(
                f"{node.at('resolvers')}[{index}]",
                "an IP address with an optional port (10.96.0.10, 127.0.0.1:5353, [fd00::a]:53)",
                entry,
            )
        else:
            resolvers.append(parsed)
    defaults = DnsCheckSettings()
    timeout = _duration(node, "timeout", defaults.timeout_s, 0.1, 60)
    minimum = _duration(node, "minInterval", defaults.min_interval_s, 1, 86400)
    maximum = _duration(node, "maxInterval", defaults.max_interval_s, 1, 86400)
    if maximum < minimum:
        node.report(node.at("maxInterval"), "must not be shorter than minInterval")
    grace = _duration(node, "grace", 0.0, 0, 86400) if node.has("grace") else None
    return DnsCheckSettings(
        grace_s=grace,
        enabled=node.boolean("enabled", default=False),
        resolvers=tuple(resolvers),
        timeout_s=timeout,
        min_interval_s=minimum,
        max_interval_s=maximum,
    )


def _dns_defaults(node: Node, config: ServerConfig) -> ServerConfig:
    _only_keys(
        node,
        (
            "refreshRate",
            "respectTTL",
            "lookupFamily",
            "minRefreshRate",
            "happyEyeballsFirstFamily",
            "happyEyeballsFirstFamilyCount",
        ),
    )
    refresh = _duration(node, "refreshRate", 30.0, 1, 86400) if node.has("refreshRate") else None
    minimum = (
        _duration(node, "minRefreshRate", 5.0, 1, 86400) if node.has("minRefreshRate") else None
    )
    family = node.optional_string("lookupFamily", choices=tuple(LOOKUP_FAMILIES))
    first = node.optional_string("happyEyeballsFirstFamily", choices=tuple(FIRST_FAMILIES))
    count = node.optional_integer(
        "happyEyeballsFirstFamilyCount", minimum=1, maximum=MAX_FIRST_FAMILY_COUNT
    )
    happy_eyeballs = None
    if first is not None or count is not None:
        happy_eyeballs = HappyEyeballs(FIRST_FAMILIES[first] if first else None, count)
    return dataclasses.replace(
        config,
        dns_refresh_s=refresh,
        dns_respect_ttl=node.optional_boolean("respectTTL"),
        dns_lookup_family=LOOKUP_FAMILIES[family] if family is not None else None,
        dns_min_refresh_s=minimum,
        dns_happy_eyeballs=happy_eyeballs,
    )


def _access_log(node: Node | None) -> AccessLogFormat:
    if node is None:
        return "json"
    _only_keys(node, ("format", "enabled"))
    log_format = node.choice("format", ACCESS_LOG_FORMATS, default="json")
    return log_format if node.boolean("enabled", default=True) else "off"


def _system_ca_file(node: Node | None) -> str:
    if node is None:
        return DEFAULT_SYSTEM_CA_FILE
    _only_keys(node, ("systemCABundle",))
    path = node.string("systemCABundle", default=DEFAULT_SYSTEM_CA_FILE)
    if not path.startswith("/"):
        node.expected(node.at("systemCABundle"), "an absolute path (on Envoy's machine)", path)
        return DEFAULT_SYSTEM_CA_FILE
    return path


def _duration(node: Node, key: str, default: float, minimum: float, maximum: float) -> float:
    text = node.optional_string(key)
    if text is None:
        return default
    seconds = parse_duration(text)
    if seconds is None:
        node.expected(node.at(key), DURATION_EXPECTED, text)
        return default
    if not minimum <= seconds <= maximum:
        node.report(node.at(key), f"must be from {minimum:g}s to {maximum:g}s, got {text!r}")
        return default
    return seconds
