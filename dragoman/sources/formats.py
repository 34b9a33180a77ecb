"""String formats the Kubernetes API server and the Gateway API CRDs enforce."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"{_LABEL}")
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_WILDCARD_HOSTNAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")
_KIND = re.compile(r"[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?")
_QUALIFIED_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LISTENER_PROTOCOL = re.compile(
    rf"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?|{_LABEL}(\.{_LABEL})*/[A-Za-z0-9]+"
)
_IANA_SVC_NAME = re.compile(r"[-a-z0-9]+")
# Characters the HTTPRoute CRD allows in an Exact or PathPrefix path (RFC 3986 pchar and '/').
_HTTP_PATH = re.compile(r"(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+")


@dataclass(frozen=True, slots=True)
class Format:
    """A named string format: `expected` completes "expected ..., got ..."."""

    expected: str
    accepts: Callable[[str], bool]


def _matches(pattern: re.Pattern[str], max_length: int) -> Callable[[str], bool]:
    return lambda value: len(value) <= max_length and pattern.fullmatch(value) is not None


def _is_iana_svc_name(value: str) -> bool:
    return (
        len(value) <= 15
        and _IANA_SVC_NAME.fullmatch(value) is not None
        and re.search("[a-z]", value) is not None
        and not value.startswith("-")
        and not value.endswith("-")
        and "--" not in value
    )


def _is_qualified_name(value: str) -> bool:
    prefix, slash, name = value.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and _QUALIFIED_NAME_PART.fullmatch(name) is not None


def _is_ip(version: int) -> Callable[[str], bool]:
    def accepts(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False

    return accepts


DNS1123_LABEL = Format(
    "a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter "
    "or digit, at most 63 characters)",
    _matches(_DNS1123_LABEL, 63),
)
DNS1123_SUBDOMAIN = Format(
    "a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with "
    "a letter or digit, at most 253 characters)",
    _matches(_DNS1123_SUBDOMAIN, 253),
)
DNS1035_LABEL = Format(
    "a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending "
    "with a letter or digit, at most 63 characters)",
    _matches(_DNS1035_LABEL, 63),
)
IANA_SVC_NAME = Format(
    "a port name (at most 15 lowercase letters, digits and '-', with at least one letter, "
    "no '-' at either end and no '--')",
    _is_iana_svc_name,
)
QUALIFIED_NAME = Format(
    'a qualified name such as "http" or "kubernetes.io/h2c"', _is_qualified_name
)
HOSTNAME = Format(
    'a hostname such as "example.com" or "*.example.com" (lowercase, at most 253 characters)',
    _matches(_WILDCARD_HOSTNAME, 253),
)
GROUP = Format(
    'an API group ("" or a DNS-1123 subdomain)',
    lambda value: value == "" or _matches(_DNS1123_SUBDOMAIN, 253)(value),
)
KIND = Format(
    "a kind such as \"Service\" (letters, digits and '-', at most 63 characters)",
    _matches(_KIND, 63),
)
LISTENER_PROTOCOL = Format(
    'a protocol such as "HTTP" or "example.com/custom"', _matches(_LISTENER_PROTOCOL, 255)
)
IPV4 = Format("an IPv4 address", _is_ip(4))
IPV6 = Format("an IPv6 address", _is_ip(6))


def http_path_problem(value: str) -> str | None:
    """Why an Exact or PathPrefix path value breaks the HTTPRoute CRD's rules, or None."""
    if not value.startswith("/"):
        return "must be an absolute path starting with '/'"
    for bad in ("//", "/./", "/../", "%2f", "%2F", "#"):
        if bad in value:
            return f"must not contain {bad!r}"
    for bad in ("/..", "/."):
        if value.endswith(bad):
            return f"must not end with {bad!r}"
    if _HTTP_PATH.fullmatch(value) is None:
        return "must contain only URL path characters (RFC 3986) or %-escapes"
    return None


def or_empty(format: Format) -> Format:
    """The same format, also accepting "" (for optional names the API defaults to "")."""
    return Format(f'{format.expected} or ""', lambda value: value == "" or format.accepts(value))
