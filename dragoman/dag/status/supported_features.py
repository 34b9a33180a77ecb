"""The Gateway API features dragoman implements (GEP-2162), listed in every accepted
GatewayClass's status.supportedFeatures.

One table: each feature name (as the Gateway API conformance suite names it) with the test of
this repository that proves dragoman implements it. A feature is listed only with such a
test; `tests/dag/status/test_supported_features.py` checks that every test named exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The test files named below.
DAG_BACKEND_TLS = "tests/dag/upstreams/test_backend_tls.py"
DAG_CONFORMANCE = "tests/dag/test_conformance.py"
DAG_L4_ROUTES = "tests/dag/routes/test_l4_routes.py"
DAG_LISTENER_SETS = "tests/dag/frontends/test_listener_sets.py"
DAG_ROUTE_CONFORMANCE = "tests/dag/test_route_conformance.py"
DAG_ROUTE_FILTERS = "tests/dag/routes/test_filters.py"
DAG_UPSTREAMS = "tests/dag/upstreams/test_external_name_services.py"
E2E_ENVOY_CLIENT_CERTIFICATE = "tests/e2e/test_envoy_client_certificate.py"
E2E_ENVOY_CLIENT_VALIDATION = "tests/e2e/test_envoy_client_validation.py"
E2E_ENVOY_RETRIES = "tests/e2e/test_envoy_retries.py"
E2E_ENVOY_ROUTES = "tests/e2e/test_envoy_routes.py"
ENVOY_HTTPS = "tests/envoy/resources/test_https_listeners.py"
ENVOY_ROUTE_FILTERS = "tests/envoy/resources/test_route_filters.py"

# Feature name -> (test file, test function) proving dragoman implements it.
SUPPORTED_FEATURES: Mapping[str, tuple[str, str]] = {
    # Core.
    "Gateway": (DAG_CONFORMANCE, "test_gateway_with_attached_routes"),
    "HTTPRoute": (DAG_CONFORMANCE, "test_httproute_simple_and_cross_namespace"),
    "ReferenceGrant": (DAG_CONFORMANCE, "test_httproute_reference_grant_and_its_deletion"),
    "GRPCRoute": (DAG_ROUTE_CONFORMANCE, "test_grpc_method_and_header_matching"),
    "TCPRoute": (DAG_L4_ROUTES, "test_simple_route_is_accepted_and_served"),
    "TLSRoute": (DAG_L4_ROUTES, "test_mixed_termination_on_one_port"),
    "UDPRoute": (DAG_L4_ROUTES, "test_simple_route_is_accepted_and_served"),
    "BackendTLSPolicy": (DAG_BACKEND_TLS, "test_a_policy_gives_its_service_port_verified_tls"),
    # Gateway, extended.
    "GatewayHTTPListenerIsolation": (DAG_CONFORMANCE, "test_gateway_http_listener_isolation"),
    "GatewayHTTPSListenerDetectMisdirectedRequests": (
        ENVOY_HTTPS,
        "test_each_chain_routes_only_its_listener_and_answers_421_for_other_hosts",
    ),
    "GatewayListenerSet": (
        DAG_LISTENER_SETS,
        "test_routes_attach_to_a_listener_set_and_are_served_with_its_gateway",
    ),
    "GatewayBackendClientCertificate": (
        E2E_ENVOY_CLIENT_CERTIFICATE,
        "test_the_gateway_presents_its_client_certificate",
    ),
    "GatewayFrontendClientCertificateValidation": (
        E2E_ENVOY_CLIENT_VALIDATION,
        "test_a_client_another_ca_signed_is_refused",
    ),
    "GatewayFrontendClientCertificateValidationInsecureFallback": (
        E2E_ENVOY_CLIENT_VALIDATION,
        "test_insecure_fallback_lets_every_client_through",
    ),
    # HTTPRoute, extended.
    "HTTPRouteQueryParamMatching": (DAG_ROUTE_CONFORMANCE, "test_query_param_matching"),
    "HTTPRouteMethodMatching": (DAG_ROUTE_CONFORMANCE, "test_method_matching"),
    "HTTPRouteResponseHeaderModification": (
        E2E_ENVOY_ROUTES,
        "test_header_modifiers_on_rule_and_backend",
    ),
    "HTTPRouteBackendRequestHeaderModification": (
        DAG_ROUTE_FILTERS,
        "test_backend_filters_apply_to_their_backend_only",
    ),
    "HTTPRoutePortRedirect": (E2E_ENVOY_ROUTES, "test_redirects"),
    "HTTPRouteSchemeRedirect": (E2E_ENVOY_ROUTES, "test_redirects"),
    "HTTPRoutePathRedirect": (E2E_ENVOY_ROUTES, "test_redirects"),
    "HTTPRoute303RedirectStatusCode": (ENVOY_ROUTE_FILTERS, "test_redirects"),
    "HTTPRoute307RedirectStatusCode": (E2E_ENVOY_ROUTES, "test_redirects"),
    "HTTPRoute308RedirectStatusCode": (E2E_ENVOY_ROUTES, "test_redirects"),
    "HTTPRouteHostRewrite": (E2E_ENVOY_ROUTES, "test_url_rewrites"),
    "HTTPRoutePathRewrite": (E2E_ENVOY_ROUTES, "test_url_rewrites"),
    "HTTPRouteRequestMirror": (
        E2E_ENVOY_ROUTES,
        "test_mirrors_reach_their_backends_and_an_external_one_with_its_own_host",
    ),
    "HTTPRouteRequestTimeout": (DAG_ROUTE_FILTERS, "test_rule_timeouts_reach_the_action"),
    "HTTPRouteBackendTimeout": (DAG_ROUTE_FILTERS, "test_rule_timeouts_reach_the_action"),
    "HTTPRouteBackendProtocolH2C": (DAG_UPSTREAMS, "test_tls_to_external_hosts"),
    "HTTPRouteBackendProtocolWebSocket": (
        E2E_ENVOY_ROUTES,
        "test_a_websocket_upgrade_reaches_a_kubernetes_io_ws_backend",
    ),
    "HTTPRouteCORS": (
        DAG_ROUTE_FILTERS,
        "test_a_cors_filter_gives_the_route_its_policy_and_forwards",
    ),
    # HTTPRoute retry (GEP-1731). Not HTTPRouteRetryBackoff: Envoy waits a random time up to
    # the back-off, where the GEP asks for at least the back-off.
    "HTTPRouteRetry": (E2E_ENVOY_RETRIES, "test_listed_codes_are_retried_up_to_attempts"),
    "HTTPRouteRetryCodes": (E2E_ENVOY_RETRIES, "test_codes_not_listed_are_not_retried"),
    "HTTPRouteRetryConnectionError": (E2E_ENVOY_RETRIES, "test_connection_resets_are_retried"),
    "HTTPRouteRetryBackendTimeout": (
        E2E_ENVOY_RETRIES,
        "test_a_backend_request_timeout_bounds_each_attempt",
    ),
}


def supported_features() -> list[dict[str, Any]]:
    """status.supportedFeatures: `{name}` entries, sorted by name as the API requires."""
    return [{"name": name} for name in sorted(SUPPORTED_FEATURES)]
