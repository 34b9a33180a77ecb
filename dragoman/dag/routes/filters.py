"""Route filters to what a rule does: header edits, a redirect, rewrites, mirrors.

Filters that dragoman cannot honour (an ExtensionRef to a kind other than dragoman.dev's
CredentialInjector) or that cannot be combined (a redirect with a mirror) make the rule
invalid: it answers 500 rather than silently skipping the filter, as the Gateway API asks,
and a Problem names the filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.model import NO_EDITS, CorsPolicy, HeaderEdits, PathRewrite, Problem, Redirect
from dragoman.dag.routes.envoy_strings import header_name_problem, header_value_problem
from dragoman.objects import (
    ExtensionRef,
    HeaderModifier,
    HTTPCORSFilter,
    ObjectKey,
    RequestMirror,
    RequestRedirect,
    RouteFilter,
)
from dragoman.objects.credential_injector import CREDENTIAL_INJECTOR
from dragoman.objects.meta import DRAGOMAN_GROUP

HOST = "host"


@dataclass(frozen=True, slots=True)
class RuleFilters:
    request_headers: HeaderEdits = NO_EDITS
    response_headers: HeaderEdits = NO_EDITS
    redirect: Redirect | None = None
    host_rewrite: str | None = None
    path_rewrite: PathRewrite | None = None
    # (index in the filter list, mirror), for the caller to resolve the backendRef
    mirrors: tuple[tuple[int, RequestMirror], ...] = ()
    invalid: bool = False  # the rule must answer an error instead of forwarding
    problems: tuple[Problem, ...] = ()
    cors: CorsPolicy | None = None
    # (index in the filter list, CredentialInjector reference), for the caller to resolve
    injectors: tuple[tuple[int, ExtensionRef], ...] = ()


NO_FILTERS = RuleFilters()


def rule_filters(
    route: ObjectKey, field_path: str, filters: Sequence[RouteFilter], prefix: str
) -> RuleFilters:
    """What `filters` (at `field_path`, e.g. "spec.rules[0].filters") ask for; `prefix` is
    the rule's PathPrefix match, which ReplacePrefixMatch replaces."""
    if not filters:
        return NO_FILTERS  # most rules have none
    problems: list[Problem] = []
    request = response = HeaderEdits()
    redirect: Redirect | None = None
    host_rewrite: str | None = None
    path_rewrite: PathRewrite | None = None
    mirrors: list[tuple[int, RequestMirror]] = []
    injectors: list[tuple[int, ExtensionRef]] = []  # CredentialInjectors, for the caller
    cors: CorsPolicy | None = None
    invalid = False

    def problem(at: str, reason: str, message: str) -> None:
        problems.append(Problem(object=route, field=at, reason=reason, message=message))

    for index, route_filter in enumerate(filters):
        at = f"{field_path}[{index}]"
        refused = envoy_refuses(route_filter, at)
        if refused:
            # Sent as written, Envoy would refuse the route table of every route on the
            # listener; refused here, only this rule answers 500.
            invalid = True
            for field, message in refused:
                problem(field, "UnsupportedValue", f"{message}; {_ANSWERS_500}")
            continue
        if route_filter.request_header_modifier is not None:
            request, host = header_edits(route_filter.request_header_modifier)
            host_rewrite = host_rewrite or host
            if any(name.lower() == HOST for name in route_filter.request_header_modifier.remove):
                problem(
                    f"{at}.requestHeaderModifier.remove",
                    "UnsupportedValue",
                    "the Host header cannot be removed; this entry is ignored",
                )
        elif route_filter.response_header_modifier is not None:
            response, _ = header_edits(route_filter.response_header_modifier, host_special=False)
        elif route_filter.request_redirect is not None:
            redirect = _redirect(route_filter.request_redirect, prefix)
        elif route_filter.url_rewrite is not None:
            rewrite = route_filter.url_rewrite
            # URLRewrite names the Host explicitly: it wins over a header modifier's Host.
            host_rewrite = rewrite.hostname or host_rewrite
            if rewrite.path is not None:
                path_rewrite = _path_rewrite(rewrite.path.type, rewrite.path.value, prefix)
        elif route_filter.request_mirror is not None:
            mirrors.append((index, route_filter.request_mirror))
        elif route_filter.cors is not None:
            cors = _cors_policy(route_filter.cors)
            problems.extend(_cors_problems(route, at, route_filter.cors))
        elif (ref := route_filter.extension_ref) is not None and _injects_credential(ref):
            injectors.append((index, ref))
        else:
            invalid = True
            message = f"filter type {route_filter.type!r} is not supported; {_ANSWERS_500}"
            problem(f"{at}.type", "UnsupportedValue", message)
    if redirect is not None and mirrors:
        invalid = True
        problem(
            field_path,
            "IncompatibleFilters",
            "a RequestRedirect answers the request itself, so there is nothing to mirror; "
            + _ANSWERS_500,
        )
    return RuleFilters(
        request_headers=request,
        response_headers=response,
        redirect=redirect,
        host_rewrite=host_rewrite,
        path_rewrite=path_rewrite,
        mirrors=tuple(mirrors),
        invalid=invalid,
        problems=tuple(problems),
        cors=cors,
        injectors=tuple(injectors),
    )


def _injects_credential(ref: ExtensionRef) -> bool:
    return (ref.group, ref.kind) == (DRAGOMAN_GROUP, CREDENTIAL_INJECTOR)


# What becomes of the requests a rule whose filters cannot be served matches.
_ANSWERS_500 = "requests this rule matches answer 500"


def _redirect(spec: RequestRedirect, prefix: str) -> Redirect:
    return Redirect(
        status=spec.status_code,
        scheme=spec.scheme,
        hostname=spec.hostname,
        path=_path_rewrite(spec.path.type, spec.path.value, prefix) if spec.path else None,
        port=spec.port,
    )


def _cors_policy(spec: HTTPCORSFilter) -> CorsPolicy:
    return CorsPolicy(
        allow_origins=spec.allow_origins,
        allow_methods=spec.allow_methods,
        allow_headers=spec.allow_headers,
        expose_headers=spec.expose_headers,
        max_age_s=spec.max_age_s,
        allow_credentials=spec.allow_credentials,
    )


def _cors_problems(route: ObjectKey, at: str, spec: HTTPCORSFilter) -> list[Problem]:
    """What of a CORS filter browsers would not honour as written."""
    return [
        Problem(
            object=route,
            field=f"{at}.cors.{field}",
            reason="UnsupportedValue",
            message=f"{field} '*' with allowCredentials: Envoy answers '*', which browsers "
            "do not honour for requests with credentials; list the header names",
        )
        for field, values in (
            ("allowHeaders", spec.allow_headers),
            ("exposeHeaders", spec.expose_headers),
        )
        if spec.allow_credentials and "*" in values
    ]


def envoy_refuses(route_filter: RouteFilter, at: str) -> list[tuple[str, str]]:
    """(field, why) for every string of `route_filter` (at `at`) that Envoy would refuse."""
    found: list[tuple[str, str]] = []
    for key, modifier, response in (
        ("requestHeaderModifier", route_filter.request_header_modifier, False),
        ("responseHeaderModifier", route_filter.response_header_modifier, True),
    ):
        if modifier is None:
            continue
        for list_name, headers in (("set", modifier.set), ("add", modifier.add)):
            for index, header in enumerate(headers):
                field = f"{at}.{key}.{list_name}[{index}]"
                name_problem = header_name_problem(header.name, editable_host=not response)
                if name_problem is not None:
                    found.append((f"{field}.name", name_problem))
                value_problem = header_value_problem(header.value)
                if value_problem is not None:
                    found.append((f"{field}.value", value_problem))
        for index, name in enumerate(modifier.remove):
            # A request's Host is never removed (reported apart, and the entry ignored).
            name_problem = header_name_problem(name, editable_host=not response)
            if name_problem is not None:
                found.append((f"{at}.{key}.remove[{index}]", name_problem))
    for key, spec in (
        ("requestRedirect", route_filter.request_redirect),
        ("urlRewrite", route_filter.url_rewrite),
    ):
        if spec is None:
            continue
        if spec.path is not None:
            field = (
                "replaceFullPath" if spec.path.type == "ReplaceFullPath" else "replacePrefixMatch"
            )
            path_problem = header_value_problem(spec.path.value)
            if path_problem is not None:
                found.append((f"{at}.{key}.path.{field}", path_problem))
        if spec.hostname is not None:
            host_problem = header_value_problem(spec.hostname)
            if host_problem is not None:
                found.append((f"{at}.{key}.hostname", host_problem))
    return found


def header_edits(
    modifier: HeaderModifier, *, host_special: bool = True
) -> tuple[HeaderEdits, str | None]:
    """The edits a header modifier makes, and a Host it sets (Envoy rewrites Host itself).

    Names compare case-insensitively; of equivalent names only the first counts.
    """
    host: str | None = None

    def first_of_each(headers: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        nonlocal host
        seen: set[str] = set()
        kept = []
        for name, value in headers:
            lowered = name.lower()
            if lowered in seen:
                continue
            seen.add(lowered)
            if host_special and lowered == HOST:
                host = host or value
                continue
            kept.append((name, value))
        return tuple(kept)

    set_ = first_of_each([(h.name, h.value) for h in modifier.set])
    add = first_of_each([(h.name, h.value) for h in modifier.add])
    removed: list[str] = []
    for name in modifier.remove:
        lowered = name.lower()
        if lowered not in {r.lower() for r in removed} and not (host_special and lowered == HOST):
            removed.append(name)
    return HeaderEdits(set=set_, add=add, remove=tuple(removed)), host


def _path_rewrite(kind: str, value: str, prefix: str) -> PathRewrite:
    """(`kind`: ReplaceFullPath or ReplacePrefixMatch, the only types the parser accepts.)"""
    if kind == "ReplacePrefixMatch":
        return PathRewrite(type="ReplacePrefixMatch", value=value, prefix=prefix)
    # A full path must be absolute; an empty one means the root.
    return PathRewrite(
        type="ReplaceFullPath", value=value if value.startswith("/") else f"/{value}"
    )
