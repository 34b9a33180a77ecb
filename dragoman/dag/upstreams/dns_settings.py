"""Per-backend DNS settings from annotations on an ExternalName Service or an XBackend.

A bad value is reported (naming the Service and the annotation) and the default is used, so
one typo never takes a backend out of service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from dragoman.dag.dns_notation import (
    FIRST_FAMILIES,
    LOOKUP_FAMILIES,
    MAX_FIRST_FAMILY_COUNT,
    parse_resolver,
)
from dragoman.dag.model import (
    DEFAULT_DNS_SETTINGS,
    AddressFamily,
    DnsSettings,
    HappyEyeballs,
    LookupFamily,
)
from dragoman.objects.durations import DURATION_EXPECTED, parse_duration
from dragoman.objects.meta import KindObject

PREFIX = "dragoman.dev/"
LOOKUP_FAMILY = PREFIX + "dns-lookup-family"
REFRESH_RATE = PREFIX + "dns-refresh-rate"
MIN_REFRESH_RATE = PREFIX + "dns-min-refresh-rate"
RESPECT_TTL = PREFIX + "dns-respect-ttl"
FAILURE_REFRESH_BASE = PREFIX + "dns-failure-refresh-base"
FAILURE_REFRESH_MAX = PREFIX + "dns-failure-refresh-max"
JITTER = PREFIX + "dns-jitter"
RESOLVERS = PREFIX + "dns-resolvers"
MODE = PREFIX + "dns-mode"
FIRST_FAMILY = PREFIX + "dns-happy-eyeballs-first-family"
FIRST_FAMILY_COUNT = PREFIX + "dns-happy-eyeballs-first-family-count"

MODES = ("strict", "logical")
DEFAULT_RESOLVERS = "Envoy's resolver (from its bootstrap)"
MAX_RESOLVERS = 8
# Bounds that keep Envoy from hammering a resolver, or from never looking again.
MIN_REFRESH_S = 1.0
MAX_REFRESH_S = 86400.0
MAX_JITTER_S = 3600.0


@dataclass(frozen=True, slots=True)
class ServiceDnsSettings:
    settings: DnsSettings
    problems: tuple[str, ...]  # one message per bad annotation, naming it


# What a Service without DNS annotations gets (most of them): one value shared by all.
_DEFAULTS = ServiceDnsSettings(DEFAULT_DNS_SETTINGS, ())


def service_dns_settings(service: KindObject, dns_check: bool = False) -> ServiceDnsSettings:
    """The Service's DNS settings. With the DNS check on, its own resolvers are refused: the
    check vets the addresses dragoman's resolvers return, and a Service resolving through
    servers its owner chose could get other ones, never vetted."""
    annotations = service.meta.annotations
    if not annotations or not any(key.startswith(PREFIX + "dns-") for key in annotations):
        return _DEFAULTS
    problems: list[str] = []
    reader = _Reader(service, annotations, problems)
    family: LookupFamily | None = reader.read(
        LOOKUP_FAMILY, _choice(LOOKUP_FAMILIES), "the server's default"
    )
    refresh = reader.read(
        REFRESH_RATE, _duration(MIN_REFRESH_S, MAX_REFRESH_S), "the server's default (30s)"
    )
    respect_ttl = reader.read(RESPECT_TTL, _boolean, "the server's default (true)")
    min_refresh = reader.read(
        MIN_REFRESH_RATE, _duration(MIN_REFRESH_S, MAX_REFRESH_S), "the server's default"
    )
    base = reader.read(
        FAILURE_REFRESH_BASE, _duration(MIN_REFRESH_S, MAX_REFRESH_S), "the refresh rate"
    )
    maximum = reader.read(
        FAILURE_REFRESH_MAX, _duration(MIN_REFRESH_S, MAX_REFRESH_S), "ten times the base"
    )
    if maximum is not None and base is None:
        reader.report(FAILURE_REFRESH_MAX, f"needs {FAILURE_REFRESH_BASE} too", "the refresh rate")
        maximum = None
    elif maximum is not None and base is not None and maximum < base:
        reader.report(
            FAILURE_REFRESH_MAX, f"is shorter than {FAILURE_REFRESH_BASE}", "ten times the base"
        )
        maximum = None
    if base is not None and maximum is None:
        maximum = min(base * 10, MAX_REFRESH_S)
    jitter = reader.read(JITTER, _duration(0.0, MAX_JITTER_S), "none")
    resolvers = None
    if dns_check and RESOLVERS in annotations:
        reader.report(
            RESOLVERS,
            "is not allowed while the DNS check is on (dnsCheck: the check vets the addresses "
            "dragoman's resolvers return, so Envoy must resolve through the same ones)",
            DEFAULT_RESOLVERS,
        )
    else:
        resolvers = reader.read(RESOLVERS, _resolvers, DEFAULT_RESOLVERS)
    mode = reader.read(MODE, _choice({m: m for m in MODES}), "strict")
    happy_eyeballs = _happy_eyeballs(reader, mode == "logical", family)
    settings = DnsSettings(
        lookup_family=family,
        refresh_s=refresh,
        respect_ttl=respect_ttl,
        failure_base_s=base,
        failure_max_s=maximum,
        jitter_s=jitter or None,
        min_refresh_s=min_refresh,
        resolvers=resolvers or (),
        logical=mode == "logical",
        happy_eyeballs=happy_eyeballs,
    )
    return ServiceDnsSettings(settings, tuple(problems))


def _happy_eyeballs(
    reader: _Reader, logical: bool, family: LookupFamily | None
) -> HappyEyeballs | None:
    """The first family a logical cluster's host tries and how many of its addresses; only a
    logical cluster's host has addresses of both families to race (a strict cluster makes a
    host of each address), and only with the lookup family `all`."""
    first: AddressFamily | None = reader.read(
        FIRST_FAMILY, _choice(FIRST_FAMILIES), "Envoy's own order"
    )
    count = reader.read(FIRST_FAMILY_COUNT, _count, "one address at a time")
    if first is None and count is None:
        return None
    needs = None
    if not logical:
        needs = f"needs {MODE}: logical (a strict cluster makes a host of each address)"
    elif family is not None and family != "ALL":
        needs = f"needs {LOOKUP_FAMILY}: all (a single family is looked up)"
    if needs is None:
        return HappyEyeballs(first, count)
    for name, value in ((FIRST_FAMILY, first), (FIRST_FAMILY_COUNT, count)):
        if value is not None:
            reader.report(name, needs, "Envoy's own order")
    return None


def _count(text: str) -> Parsed[int]:
    value = text.strip()
    if not value.isdigit() or not 1 <= int(value) <= MAX_FIRST_FAMILY_COUNT:
        return None, f"expected a number from 1 to {MAX_FIRST_FAMILY_COUNT}, got {_got(text)}"
    return int(value), None


T = TypeVar("T")
# A parsed value, or None and why the text is not one.
Parsed = tuple[T | None, str | None]
_Choice = TypeVar("_Choice", bound=str)


class _Reader:
    def __init__(
        self, service: KindObject, annotations: Mapping[str, str], problems: list[str]
    ) -> None:
        self._service = service
        self._annotations = annotations
        self._problems = problems

    def read(self, name: str, parse: Callable[[str], Parsed[T]], default: str) -> T | None:
        text = self._annotations.get(name)
        if text is None:
            return None
        value, problem = parse(text)
        if problem is not None:
            self.report(name, problem, default)
            return None
        return value

    def report(self, name: str, problem: str, default: str) -> None:
        meta = self._service.meta
        self._problems.append(
            f"{self._service.kind} {meta.namespace}/{meta.name} annotation {name}: {problem}; "
            f"using {default} instead"
        )


def _got(text: str) -> str:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return repr(shown)


def _choice(values: Mapping[str, _Choice]) -> Callable[[str], Parsed[_Choice]]:
    def parse(text: str) -> Parsed[_Choice]:
        value = values.get(text.strip().lower())
        if value is None:
            return None, f"expected one of {', '.join(values)}, got {_got(text)}"
        return value, None

    return parse


def _duration(minimum: float, maximum: float) -> Callable[[str], Parsed[float]]:
    def parse(text: str) -> Parsed[float]:
        seconds = parse_duration(text)
        if seconds is None:
            return None, f"expected {DURATION_EXPECTED}, got {_got(text)}"
        if not minimum <= seconds <= maximum:
            return None, f"must be from {minimum:g}s to {maximum:g}s, got {_got(text)}"
        return seconds, None

    return parse


def _boolean(text: str) -> Parsed[bool]:
    value = text.strip().lower()
    if value not in ("true", "false"):
        return None, f'expected "true" or "false", got {_got(text)}'
    return value == "true", None


def _resolvers(text: str) -> Parsed[tuple[tuple[str, int], ...]]:
    entries = [entry for entry in text.split(",") if entry.strip()]
    if not entries:
        return None, "expected a comma-separated list of resolver addresses, got nothing"
    if len(entries) > MAX_RESOLVERS:
        return None, f"lists {len(entries)} resolvers; at most {MAX_RESOLVERS} are allowed"
    resolvers = []
    for entry in entries:
        parsed = parse_resolver(entry)
        if parsed is None:
            return None, (
                f"expected IP addresses with an optional port (10.0.0.10, 10.0.0.10:53, "
                f"[fd00::10]:53), got {_got(entry.strip())}"
            )
        resolvers.append(parsed)
    return tuple(resolvers), None
