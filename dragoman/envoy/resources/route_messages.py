"""RouteTable → envoy.config.route.v3.RouteConfiguration, with Gateway API match semantics."""

from __future__ import annotations

import re

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.config.route.v3 import route_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2
from google.protobuf.wrappers_pb2 import BoolValue, UInt32Value

from dragoman.dag.model import (
    Backend,
    DirectResponse,
    Forward,
    HeaderEdits,
    Mirror,
    PathRewrite,
    Redirect,
    Retry,
    Route,
    RouteMatch,
    RouteTable,
    ValueMatch,
    VirtualHost,
)
from dragoman.envoy.resources.common_messages import pack, seconds
from dragoman.envoy.resources.cors import CORS_FILTER, cors_policy
from dragoman.envoy.resources.credential_injection import enabled_on_route
from dragoman.envoy.resources.traffic_policy_messages import (
    STATEFUL_SESSION_FILTER,
    stateful_session_per_route,
)
from dragoman.objects.backend_policy import LoadBalancer

# Weighted share of traffic for backends whose reference is invalid. The `dragoman:` prefix is
# reserved: no cluster ever has this name, so Envoy answers that share with
# cluster_not_found_response_code 500 (503 for gRPC), as the Gateway API requires.
INVALID_BACKEND_CLUSTER = "dragoman:invalid-backend"

# What the Gateway API asks for when a rule has nothing valid to forward to.
NO_BACKEND_STATUS = 500
NO_GRPC_BACKEND_STATUS = 503  # gRPC clients read it as UNAVAILABLE

REDIRECT_CODES = {
    301: rc_pb2.RedirectAction.MOVED_PERMANENTLY,
    302: rc_pb2.RedirectAction.FOUND,
    303: rc_pb2.RedirectAction.SEE_OTHER,
    307: rc_pb2.RedirectAction.TEMPORARY_REDIRECT,
    308: rc_pb2.RedirectAction.PERMANENT_REDIRECT,
}
# Everything Envoy matches on (the path, without the query string).
WHOLE_PATH = "^/.*$"
SET = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
APPEND = base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD
# What every retry policy retries: a failed connection, a reset or timed-out attempt (the
# upstream sent no response), a stream the upstream refused before reading it.
RETRY_ON_CONNECTION_ERRORS = "connect-failure,refused-stream,reset"
RETRY_ON_CODES = "retriable-status-codes"


# The tree is filled in place, top down: a message handed to a constructor or a repeated
# field's extend is copied, and copying every route twice (into its virtual host, then the
# virtual host into the table) costs more than building it.


def route_configuration(table: RouteTable) -> route_pb2.RouteConfiguration:
    message = route_pb2.RouteConfiguration(
        name=table.name,
        # Routes may name the invalid-backend cluster on purpose; never reject the table for it.
        validate_clusters=BoolValue(value=False),
    )
    add = message.virtual_hosts.add
    for value in table.virtual_hosts:
        _fill_virtual_host(add(), value)
    return message


def virtual_host(value: VirtualHost) -> rc_pb2.VirtualHost:
    message = rc_pb2.VirtualHost()
    _fill_virtual_host(message, value)
    return message


def _fill_virtual_host(message: rc_pb2.VirtualHost, value: VirtualHost) -> None:
    message.name = value.name
    message.domains.extend(value.domains)
    add = message.routes.add
    for item in value.routes:
        _fill_route(add(), item)


def route(value: Route) -> rc_pb2.Route:
    message = rc_pb2.Route()
    _fill_route(message, value)
    return message


def _fill_route(message: rc_pb2.Route, value: Route) -> None:
    message.name = route_name(value)
    _fill_route_match(message.match, value.match)
    action = value.action
    if isinstance(action, Forward):
        weights = merged_weights(action)
        if not weights or (len(weights) == 1 and weights[0][0] == INVALID_BACKEND_CLUSTER):
            status = NO_GRPC_BACKEND_STATUS if action.grpc else NO_BACKEND_STATUS
            message.direct_response.CopyFrom(direct_response(DirectResponse(status)))
        else:
            fill_route_action(message.route, action, weights, value.match)
    elif isinstance(action, Redirect):
        message.redirect.CopyFrom(redirect_action(action, value.match))
    else:
        message.direct_response.CopyFrom(direct_response(action))
    if value.request_headers or value.response_headers:
        _add_header_edits(message, value.request_headers, value.response_headers)
    if value.cors is not None:
        message.typed_per_filter_config[CORS_FILTER].CopyFrom(pack(cors_policy(value.cors)))
    if isinstance(action, Forward) and action.session is not None:
        message.typed_per_filter_config[STATEFUL_SESSION_FILTER].CopyFrom(
            pack(stateful_session_per_route(action.session))
        )
    for credential in value.credentials:
        enabled_on_route(message, credential)


def route_name(value: Route) -> str:
    """Names the route rule in stats and access logs (%ROUTE_NAME%)."""
    return f"{value.source.namespace}/{value.source.name}/rule/{value.rule_index}"


def route_match(value: RouteMatch) -> rc_pb2.RouteMatch:
    match = rc_pb2.RouteMatch()
    _fill_route_match(match, value)
    return match


def _fill_route_match(match: rc_pb2.RouteMatch, value: RouteMatch) -> None:
    _fill_path_match(match, value)
    for header in value.headers:
        match.headers.append(_header_matcher(header.name, header))
    if value.method is not None:
        match.headers.append(
            rc_pb2.HeaderMatcher(
                name=":method", string_match=string_pb2.StringMatcher(exact=value.method)
            )
        )
    for query in value.query_params:
        match.query_parameters.append(
            rc_pb2.QueryParameterMatcher(name=query.name, string_match=string_matcher(query))
        )
    if value.grpc:
        match.grpc.SetInParent()


def path_match(value: RouteMatch) -> rc_pb2.RouteMatch:
    match = rc_pb2.RouteMatch()
    _fill_path_match(match, value)
    return match


def _fill_path_match(match: rc_pb2.RouteMatch, value: RouteMatch) -> None:
    if value.path_type == "Exact":
        match.path = value.path
        return
    if value.path_type == "RegularExpression":
        match.safe_regex.regex = value.path
        return
    if value.path_type != "PathPrefix":
        raise ValueError(f"unknown path match type {value.path_type!r}")
    prefix = value.path.rstrip("/")
    if not prefix:
        match.prefix = "/"
        return
    # Gateway API prefixes match whole path elements: /foo matches /foo and /foo/bar, not /foobar.
    match.path_separated_prefix = prefix


def _header_matcher(name: str, value: ValueMatch) -> rc_pb2.HeaderMatcher:
    return rc_pb2.HeaderMatcher(name=name, string_match=string_matcher(value))


def string_matcher(value: ValueMatch) -> string_pb2.StringMatcher:
    if value.regex:
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=value.value))
    return string_pb2.StringMatcher(exact=value.value)


def merged_weights(action: Forward) -> list[tuple[str, int]]:
    """(cluster, total weight) in first-seen order, backends with the same cluster and the same
    own filters merged; weight 0 means no traffic at all."""
    backends = action.backends
    if len(backends) == 1:
        # The common rule: one backendRef, nothing to merge.
        (backend,) = backends
        return (
            [(backend.cluster or INVALID_BACKEND_CLUSTER, backend.weight)]
            if backend.weight > 0
            else []
        )
    merged: dict[Backend, int] = {}
    for backend in backends:
        if backend.weight <= 0:
            continue
        key = _unweighted(backend)
        merged[key] = merged.get(key, 0) + backend.weight
    return [(key.cluster or INVALID_BACKEND_CLUSTER, weight) for key, weight in merged.items()]


def _unweighted(backend: Backend) -> Backend:
    """The backend as a merge key: its weight dropped; an invalid reference stands for the
    invalid-backend cluster, whatever filters it had."""
    if backend.cluster is None:
        return _INVALID_BACKEND
    return Backend(
        cluster=backend.cluster,
        weight=0,
        request_headers=backend.request_headers,
        response_headers=backend.response_headers,
        host_rewrite=backend.host_rewrite,
    )


_INVALID_BACKEND = Backend(INVALID_BACKEND_CLUSTER, 0)


def route_action(
    action: Forward, weights: list[tuple[str, int]], match: RouteMatch
) -> rc_pb2.RouteAction:
    message = rc_pb2.RouteAction()
    fill_route_action(message, action, weights, match)
    return message


def fill_route_action(
    message: rc_pb2.RouteAction, action: Forward, weights: list[tuple[str, int]], match: RouteMatch
) -> None:
    """Sets `message` (an empty RouteAction) to forward as `action` asks."""
    backends = _backends_by_weight_order(action, weights)
    own_filters = any(_has_own_filters(backend) for backend in backends)
    if len(weights) == 1 and not own_filters:
        message.cluster = weights[0][0]
    else:
        # No total_weight (deprecated): Envoy sums the weights itself.
        message.weighted_clusters.clusters.extend(
            _cluster_weight(name, weight, backend)
            for (name, weight), backend in zip(weights, backends, strict=True)
        )
    if any(name == INVALID_BACKEND_CLUSTER for name, _ in weights):
        message.cluster_not_found_response_code = (
            rc_pb2.RouteAction.SERVICE_UNAVAILABLE
            if action.grpc
            else rc_pb2.RouteAction.INTERNAL_SERVER_ERROR
        )
    if action.host_rewrite is not None:
        message.host_rewrite_literal = action.host_rewrite
    elif action.auto_host_rewrite:
        message.auto_host_rewrite.value = True
    if action.path_rewrite is not None:
        _rewrite_path(message, action.path_rewrite, match)
    if action.mirrors:
        message.request_mirror_policies.extend(_mirror_policy(m) for m in action.mirrors)
    if action.timeout_ms is not None:
        message.timeout.CopyFrom(seconds(action.timeout_ms / 1000))
    if action.retry is not None:
        message.retry_policy.CopyFrom(retry_policy(action.retry))
    elif action.per_try_timeout_ms is not None:
        # No retries: the policy only bounds the one attempt at a backend.
        message.retry_policy.num_retries.value = 0
    if action.per_try_timeout_ms is not None:
        message.retry_policy.per_try_timeout.CopyFrom(seconds(action.per_try_timeout_ms / 1000))
    if action.hash_client_ip:
        # Ring-hash clusters of Services with sessionAffinity ClientIP pick by this hash.
        message.hash_policy.add().connection_properties.source_ip = True
    if action.hash_policy is not None:
        # A BackendPolicy's loadBalancer ConsistentHash: what its ring-hash cluster picks by.
        message.hash_policy.append(hash_policy(action.hash_policy))
    if action.grpc:
        # Bound each call by the client's grpc-timeout header, with no cap of ours.
        message.max_stream_duration.grpc_timeout_header_max.CopyFrom(seconds(0))


def hash_policy(balancer: LoadBalancer) -> rc_pb2.RouteAction.HashPolicy:
    """The request hash a BackendPolicy's consistent hash balances on: the client's
    address, a header, or a cookie (made by Envoy when absent, with the policy's ttl)."""
    message = rc_pb2.RouteAction.HashPolicy()
    if balancer.hash_type == "Header":
        message.header.header_name = balancer.hash_header
    elif balancer.hash_type == "Cookie":
        message.cookie.name = balancer.hash_cookie
        # A ttl makes Envoy set the cookie when the request has none; 0: a session cookie.
        message.cookie.ttl.CopyFrom(seconds(balancer.hash_cookie_ttl_s or 0))
    else:
        message.connection_properties.source_ip = True
    return message


def retry_policy(retry: Retry) -> rc_pb2.RetryPolicy:
    """A rule's retries as Envoy's RetryPolicy: connection failures, resets (a per-try
    timeout counts as one) and refused streams are always retried, as GEP-1731 asks of a
    rule that sets `retry`; response codes only those the rule names."""
    message = rc_pb2.RetryPolicy(retry_on=RETRY_ON_CONNECTION_ERRORS)
    message.num_retries.value = retry.attempts
    if retry.codes:
        message.retry_on = f"{RETRY_ON_CONNECTION_ERRORS},{RETRY_ON_CODES}"
        message.retriable_status_codes.extend(retry.codes)
    if retry.backoff_ms is not None:
        # Envoy waits a random time up to the base interval, doubling it on every retry up
        # to ten times the base (its default max_interval).
        message.retry_back_off.base_interval.CopyFrom(seconds(retry.backoff_ms / 1000))
    return message


def _backends_by_weight_order(action: Forward, weights: list[tuple[str, int]]) -> list[Backend]:
    """The (unweighted) backend behind each entry of merged_weights, in the same order."""
    backends = action.backends
    if len(backends) == 1:
        # Only its own filters are read from it: its weight needs no dropping.
        (backend,) = backends
        if backend.weight <= 0:
            return []
        return [backend if backend.cluster is not None else _INVALID_BACKEND]
    seen: dict[Backend, None] = {}
    for backend in backends:
        if backend.weight > 0:
            seen.setdefault(_unweighted(backend), None)
    return list(seen)


def _has_own_filters(backend: Backend) -> bool:
    return bool(backend.request_headers or backend.response_headers or backend.host_rewrite)


def _cluster_weight(
    name: str, weight: int, backend: Backend
) -> rc_pb2.WeightedCluster.ClusterWeight:
    message = rc_pb2.WeightedCluster.ClusterWeight(name=name, weight=UInt32Value(value=weight))
    request, response = backend.request_headers, backend.response_headers
    message.request_headers_to_add.extend(_header_options(request))
    message.request_headers_to_remove.extend(request.remove)
    message.response_headers_to_add.extend(_header_options(response))
    message.response_headers_to_remove.extend(response.remove)
    if backend.host_rewrite is not None:
        message.host_rewrite_literal = backend.host_rewrite
    return message


def _rewrite_path(message: rc_pb2.RouteAction, rewrite: PathRewrite, match: RouteMatch) -> None:
    prefix, replace = _prefix_replacement(rewrite, match)
    if rewrite.type == "ReplaceFullPath":
        message.regex_rewrite.CopyFrom(_substitute(WHOLE_PATH, rewrite.value))
    elif prefix is not None and replace is not None:
        message.prefix_rewrite = replace
    elif prefix is not None:
        message.regex_rewrite.CopyFrom(_substitute(f"^{re.escape(prefix)}/*", "/"))


def redirect_action(value: Redirect, match: RouteMatch) -> rc_pb2.RedirectAction:
    message = rc_pb2.RedirectAction(response_code=REDIRECT_CODES[value.status])
    if value.scheme is not None:
        message.scheme_redirect = value.scheme
    if value.hostname is not None:
        message.host_redirect = value.hostname
    if value.location_port is not None:
        message.port_redirect = value.location_port
    rewrite = value.path
    if rewrite is not None:
        prefix, replace = _prefix_replacement(rewrite, match)
        if rewrite.type == "ReplaceFullPath":
            message.path_redirect = rewrite.value
        elif prefix is not None and replace is not None:
            message.prefix_rewrite = replace
        elif prefix is not None:
            message.regex_rewrite.CopyFrom(_substitute(f"^{re.escape(prefix)}/*", "/"))
    return message


def _prefix_replacement(rewrite: PathRewrite, match: RouteMatch) -> tuple[str | None, str | None]:
    """How to do ReplacePrefixMatch in Envoy: (matched prefix, prefix_rewrite value).

    The Gateway API replaces whole path elements: with prefix /foo, /foo/bar becomes
    <replacement>/bar and /foo becomes <replacement> (or / when that is empty). Envoy's
    prefix_rewrite swaps the matched characters, right when both sides have no trailing
    slash; a replacement of "/" (stripping the prefix) needs a regex instead: (prefix, None).
    A rule matching every path ("/") prepends the replacement: ("", replacement + "/").
    (None, None) when there is nothing to replace.
    """
    if rewrite.type != "ReplacePrefixMatch":
        return None, None
    prefix = rewrite.prefix.rstrip("/")
    replacement = rewrite.value.rstrip("/")
    if match.path_type != "PathPrefix":
        return None, None  # the CRD allows ReplacePrefixMatch only with a PathPrefix match
    if not prefix:
        return ("", f"{replacement}/") if replacement else (None, None)
    return prefix, (replacement or None)


def _substitute(pattern: str, substitution: str) -> regex_pb2.RegexMatchAndSubstitute:
    return regex_pb2.RegexMatchAndSubstitute(
        pattern=regex_pb2.RegexMatcher(regex=pattern),
        # RE2 substitution strings treat backslashes as escapes.
        substitution=substitution.replace("\\", "\\\\"),
    )


def _mirror_policy(mirror: Mirror) -> rc_pb2.RouteAction.RequestMirrorPolicy:
    policy = rc_pb2.RouteAction.RequestMirrorPolicy(
        cluster=mirror.cluster,
        # The mirror gets the request's own Host, not "<host>-shadow", so virtual hosts match.
        disable_shadow_host_suffix_append=True,
    )
    if mirror.numerator < mirror.denominator:
        # Envoy's finest fixed denominator: parts per million.
        per_million = mirror.numerator * 1_000_000 // mirror.denominator
        policy.runtime_fraction.default_value.CopyFrom(
            percent_pb2.FractionalPercent(
                numerator=per_million, denominator=percent_pb2.FractionalPercent.MILLION
            )
        )
    if mirror.host_rewrite is not None:
        policy.host_rewrite_literal = mirror.host_rewrite
    return policy


def direct_response(value: DirectResponse) -> rc_pb2.DirectResponseAction:
    action = rc_pb2.DirectResponseAction(status=value.status)
    if value.body:
        action.body.CopyFrom(base_pb2.DataSource(inline_string=value.body))
    return action


def _add_header_edits(message: rc_pb2.Route, request: HeaderEdits, response: HeaderEdits) -> None:
    message.request_headers_to_add.extend(_header_options(request))
    message.request_headers_to_remove.extend(request.remove)
    message.response_headers_to_add.extend(_header_options(response))
    message.response_headers_to_remove.extend(response.remove)


def _header_options(edits: HeaderEdits) -> list[base_pb2.HeaderValueOption]:
    return [
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=name, value=value), append_action=action
        )
        for pairs, action in ((edits.set, SET), (edits.add, APPEND))
        for name, value in pairs
    ]
