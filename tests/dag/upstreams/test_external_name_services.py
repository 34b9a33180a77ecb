"""ExternalName Services through the build: in-cluster aliases, refusals with their status,
the platform policy, per-backend DNS annotations, TLS decisions, in-cluster-first fallback."""

from __future__ import annotations

import pytest

from dragoman.dag.external_name_policy import ExternalNamePolicy, domain_rule
from dragoman.dag.model import (
    H2,
    H2C,
    HTTP1,
    AggregateCluster,
    DnsCluster,
    DnsSettings,
    EdsCluster,
    HappyEyeballs,
    SubjectAltNameMatch,
    UpstreamTls,
)
from dragoman.dag.options import BuildOptions
from dragoman.objects import ObjectKey
from tests.support.builders import external_service, http_route, service
from tests.support.status_builds import GATEWAY, build_text, parent_conditions, route_problems

ROUTE_TO_EXT = http_route("r", "ext", 443)

# --- in-cluster aliases --------------------------------------------------------------------

ALIASES = [
    # (externalName, cluster domain) -> the aliased Service's EDS cluster
    ("web.default.svc.cluster.local", "cluster.local"),
    ("web.default.svc.cluster.local.", "cluster.local"),
    ("web.default.svc", "cluster.local"),
    ("web.default.svc.corp.example", "corp.example"),
]


@pytest.mark.parametrize(("external_name", "domain"), ALIASES)
def test_in_cluster_names_alias_the_eds_cluster_never_dns(external_name: str, domain: str) -> None:
    dag = build_text(
        GATEWAY,
        service("web", 443),
        external_service("ext", external_name),
        ROUTE_TO_EXT,
        options=BuildOptions(cluster_domain=domain),
    )

    assert list(dag.clusters) == ["default/web/443"]
    assert isinstance(dag.clusters["default/web/443"], EdsCluster)
    assert parent_conditions(dag)["ResolvedRefs"]["status"] == "True"


GRANT = """
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-default, namespace: shop}
spec:
  from: [{group: "", kind: Service, namespace: default}]
  to: [{group: "", kind: Service, name: web}]
"""


def test_an_alias_into_another_namespace_needs_a_reference_grant() -> None:
    objects = (
        GATEWAY,
        service("web", 443, namespace="shop"),
        external_service("ext", "web.shop.svc.cluster.local"),
        ROUTE_TO_EXT,
    )
    refused = build_text(*objects)
    granted = build_text(*objects, GRANT)

    assert refused.clusters == {}
    resolved = parent_conditions(refused)["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "RefNotPermitted")
    assert "ReferenceGrant in namespace 'shop'" in resolved["message"]
    assert list(granted.clusters) == ["shop/web/443"]


UNSAFE = [
    ("localhost", "points to localhost"),
    ("admin.localhost.", "points to localhost"),
    ("127.0.0.1", "loopback"),
    ("169.254.169.254", "cloud metadata"),
    ("0.0.0.0", "unspecified"),
    ("169.254.1.1", "link-local"),
    ("kubernetes", "single-label"),
    ("pod.web.default.svc.cluster.local", "inside the cluster domain"),
]


@pytest.mark.parametrize(("external_name", "words"), UNSAFE)
def test_unsafe_targets_get_no_cluster_and_say_why_in_status(
    external_name: str, words: str
) -> None:
    dag = build_text(GATEWAY, external_service("ext", external_name), ROUTE_TO_EXT)

    assert dag.clusters == {}
    resolved = parent_conditions(dag)["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "UnsafeExternalName")
    assert words in resolved["message"]
    assert "Service default/ext" in resolved["message"]


# --- platform policy: domains --------------------------------------------------------------


def policy(allowed: tuple[str, ...] = (), denied: tuple[str, ...] = ()) -> BuildOptions:
    return BuildOptions(
        external_names=ExternalNamePolicy(
            allowed_domains=tuple(domain_rule(d) for d in allowed),
            denied_domains=tuple(domain_rule(d) for d in denied),
            source="policy.yaml",
        )
    )


DOMAIN_POLICIES = [
    # (allowed, denied, external name, refused by: None or words of the message)
    ((), (), "api.example.com", None),
    (("example.com",), (), "api.example.com", None),
    (("example.com",), (), "example.com", None),
    (("example.com",), (), "api.example.org", "not inside an allowed domain"),
    (("example.com",), (), "notexample.com", "not inside an allowed domain"),
    (("*.example.com",), (), "example.com", "not inside an allowed domain"),
    (("*.example.com",), (), "a.b.example.com", None),
    ((), ("internal.example.com",), "db.internal.example.com", "denied domain"),
    ((), ("internal.example.com",), "internal.example.com", "denied domain"),
    ((), ("internal.example.com",), "api.example.com", None),
    (("example.com",), ("internal.example.com",), "x.internal.example.com", "denied domain"),
    (("Example.COM.",), (), "api.example.com", None),
]


@pytest.mark.parametrize(("allowed", "denied", "name", "refused"), DOMAIN_POLICIES)
def test_domain_policy(
    allowed: tuple[str, ...], denied: tuple[str, ...], name: str, refused: str | None
) -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", name),
        ROUTE_TO_EXT,
        options=policy(allowed, denied),
    )

    resolved = parent_conditions(dag)["ResolvedRefs"]
    if refused is None:
        assert list(dag.clusters) == ["default/ext/443"]
        assert resolved["status"] == "True"
    else:
        assert dag.clusters == {}, "a refused name never gets a cluster"
        assert (resolved["status"], resolved["reason"]) == ("False", "NotAllowedByPolicy")
        assert refused in resolved["message"]
        assert "policy.yaml" in resolved["message"]


def test_the_domain_policy_does_not_apply_to_in_cluster_aliases() -> None:
    dag = build_text(
        GATEWAY,
        service("web", 443),
        external_service("ext", "web.default.svc.cluster.local"),
        ROUTE_TO_EXT,
        options=policy(allowed=("example.com",)),
    )

    assert list(dag.clusters) == ["default/web/443"]


# --- per-backend DNS settings ----------------------------------------------------------------

ANNOTATIONS = [
    ({}, DnsSettings()),
    ({"dragoman.dev/dns-lookup-family": "v4"}, DnsSettings(lookup_family="V4_ONLY")),
    ({"dragoman.dev/dns-lookup-family": "V6"}, DnsSettings(lookup_family="V6_ONLY")),
    (
        {"dragoman.dev/dns-lookup-family": "v4-preferred"},
        DnsSettings(lookup_family="V4_PREFERRED"),
    ),
    ({"dragoman.dev/dns-lookup-family": "all"}, DnsSettings(lookup_family="ALL")),
    ({"dragoman.dev/dns-refresh-rate": "1m30s"}, DnsSettings(refresh_s=90)),
    ({"dragoman.dev/dns-respect-ttl": "false"}, DnsSettings(respect_ttl=False)),
    (
        {"dragoman.dev/dns-failure-refresh-base": "2s"},
        DnsSettings(failure_base_s=2, failure_max_s=20),
    ),
    (
        {
            "dragoman.dev/dns-failure-refresh-base": "2s",
            "dragoman.dev/dns-failure-refresh-max": "1m",
        },
        DnsSettings(failure_base_s=2, failure_max_s=60),
    ),
    ({"dragoman.dev/dns-jitter": "500ms"}, DnsSettings(jitter_s=0.5)),
    ({"dragoman.dev/dns-min-refresh-rate": "10s"}, DnsSettings(min_refresh_s=10)),
    (
        {"dragoman.dev/dns-resolvers": "10.0.0.10, 10.0.0.11:5353,[fd00::a]:53"},
        DnsSettings(resolvers=(("10.0.0.10", 53), ("10.0.0.11", 5353), ("fd00::a", 53))),
    ),
    ({"dragoman.dev/dns-mode": "logical"}, DnsSettings(logical=True)),
    ({"dragoman.dev/dns-mode": "strict"}, DnsSettings()),
    (
        {
            "dragoman.dev/dns-mode": "logical",
            "dragoman.dev/dns-lookup-family": "all",
            "dragoman.dev/dns-happy-eyeballs-first-family": "V6",
            "dragoman.dev/dns-happy-eyeballs-first-family-count": "2",
        },
        DnsSettings(lookup_family="ALL", logical=True, happy_eyeballs=HappyEyeballs("V6", 2)),
    ),
    (
        # The lookup family may be the server's (dnsDefaults.lookupFamily: all).
        {"dragoman.dev/dns-mode": "logical", "dragoman.dev/dns-happy-eyeballs-first-family": "v4"},
        DnsSettings(logical=True, happy_eyeballs=HappyEyeballs("V4")),
    ),
    (
        {
            "dragoman.dev/dns-mode": "logical",
            "dragoman.dev/dns-happy-eyeballs-first-family-count": "3",
        },
        DnsSettings(logical=True, happy_eyeballs=HappyEyeballs(first_family_count=3)),
    ),
    ({"example.com/unrelated": "x"}, DnsSettings()),
]


@pytest.mark.parametrize(("annotations", "expected"), ANNOTATIONS)
def test_dns_annotations(annotations: dict[str, str], expected: DnsSettings) -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "api.example.com", annotations=annotations),
        ROUTE_TO_EXT,
    )

    cluster = dag.clusters["default/ext/443"]
    assert isinstance(cluster, DnsCluster)
    assert cluster.dns == expected
    assert route_problems(dag) == []


BAD_ANNOTATIONS = [
    ("dragoman.dev/dns-lookup-family", "ipv4", "expected one of v4, v6, v4-preferred, all"),
    ("dragoman.dev/dns-refresh-rate", "30", "expected a duration"),
    ("dragoman.dev/dns-refresh-rate", "100ms", "must be from 1s"),
    ("dragoman.dev/dns-refresh-rate", "48h", "must be from 1s"),
    ("dragoman.dev/dns-respect-ttl", "yes", 'expected "true" or "false"'),
    ("dragoman.dev/dns-failure-refresh-max", "10s", "needs dragoman.dev/dns-failure-refresh-base"),
    ("dragoman.dev/dns-jitter", "-1s", "expected a duration"),
    ("dragoman.dev/dns-min-refresh-rate", "500ms", "must be from 1s"),
    ("dragoman.dev/dns-min-refresh-rate", "soon", "expected a duration"),
    ("dragoman.dev/dns-resolvers", "dns.example.com", "expected IP addresses"),
    ("dragoman.dev/dns-resolvers", "10.0.0.1:99999", "expected IP addresses"),
    ("dragoman.dev/dns-resolvers", "[10.0.0.1]:53", "expected IP addresses"),
    ("dragoman.dev/dns-mode", "round-robin", "expected one of strict, logical"),
    ("dragoman.dev/dns-happy-eyeballs-first-family", "ipv6", "expected one of v4, v6"),
    ("dragoman.dev/dns-happy-eyeballs-first-family-count", "0", "expected a number from 1"),
    ("dragoman.dev/dns-happy-eyeballs-first-family-count", "65", "expected a number from 1"),
    (
        "dragoman.dev/dns-happy-eyeballs-first-family",
        "v6",
        "needs dragoman.dev/dns-mode: logical",
    ),
]


def test_happy_eyeballs_needs_the_lookup_family_all() -> None:
    annotations = {
        "dragoman.dev/dns-mode": "logical",
        "dragoman.dev/dns-lookup-family": "v4",
        "dragoman.dev/dns-happy-eyeballs-first-family": "v6",
        "dragoman.dev/dns-happy-eyeballs-first-family-count": "2",
    }
    dag = build_text(
        GATEWAY, external_service("ext", "api.example.com", annotations=annotations), ROUTE_TO_EXT
    )
    cluster = dag.clusters["default/ext/443"]
    assert isinstance(cluster, DnsCluster)
    assert cluster.dns == DnsSettings(lookup_family="V4_ONLY", logical=True)
    problems = route_problems(dag)
    assert [p.message.split(":")[0] for p in problems] == [
        "Service default/ext annotation dragoman.dev/dns-happy-eyeballs-first-family",
        "Service default/ext annotation dragoman.dev/dns-happy-eyeballs-first-family-count",
    ]
    assert all("needs dragoman.dev/dns-lookup-family: all" in p.message for p in problems)


@pytest.mark.parametrize(("annotation", "value", "words"), BAD_ANNOTATIONS)
def test_bad_dns_annotations_are_reported_and_the_default_is_used(
    annotation: str, value: str, words: str
) -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "api.example.com", annotations={annotation: value}),
        ROUTE_TO_EXT,
    )

    cluster = dag.clusters["default/ext/443"]
    assert isinstance(cluster, DnsCluster)
    assert cluster.dns == DnsSettings()  # the backend is still served, with defaults
    [problem] = route_problems(dag)
    assert problem.field == "spec.rules[0].backendRefs[0]"
    assert problem.message.startswith(f"Service default/ext annotation {annotation}: ")
    assert words in problem.message
    assert "using" in problem.message
    partially = parent_conditions(dag)["PartiallyInvalid"]
    assert annotation in partially["message"]
    assert parent_conditions(dag)["ResolvedRefs"]["status"] == "True"


def test_a_failure_refresh_max_shorter_than_the_base_is_refused() -> None:
    annotations = {
        "dragoman.dev/dns-failure-refresh-base": "10s",
        "dragoman.dev/dns-failure-refresh-max": "5s",
    }
    dag = build_text(
        GATEWAY, external_service("ext", "api.example.com", annotations=annotations), ROUTE_TO_EXT
    )

    cluster = dag.clusters["default/ext/443"]
    assert isinstance(cluster, DnsCluster)
    assert (cluster.dns.failure_base_s, cluster.dns.failure_max_s) == (10, 100)
    [problem] = route_problems(dag)
    assert "shorter than dragoman.dev/dns-failure-refresh-base" in problem.message


# --- TLS decisions ---------------------------------------------------------------------------

AUTO = UpstreamTls()

TLS_DECISIONS = [
    # (port, appProtocol, TLS, protocol)
    (443, "", AUTO, HTTP1),
    (443, "https", AUTO, HTTP1),
    (443, "HTTPS", AUTO, HTTP1),
    (8443, "https", AUTO, HTTP1),
    (8443, "kubernetes.io/wss", AUTO, HTTP1),
    (8443, "", None, HTTP1),
    (80, "", None, HTTP1),
    (443, "http", None, HTTP1),  # an explicit cleartext appProtocol wins over the port
    (443, "kubernetes.io/h2c", None, H2C),
    (443, "kubernetes.io/ws", None, HTTP1),
]


@pytest.mark.parametrize(("port", "app_protocol", "tls", "protocol"), TLS_DECISIONS)
def test_tls_to_external_hosts(
    port: int, app_protocol: str, tls: UpstreamTls | None, protocol: str
) -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "api.example.com", port, app_protocol=app_protocol),
        http_route("r", "ext", port),
    )

    [cluster] = dag.clusters.values()
    assert isinstance(cluster, DnsCluster)
    assert (cluster.tls, cluster.protocol) == (tls, protocol)


def test_automatic_tls_never_checks_the_chain_without_the_name() -> None:
    # SNI and the verified name both come from the endpoint's hostname (auto_host_sni and
    # auto_sni_san_validation); an explicit SNI always comes with the names to verify.
    assert AUTO.sni is None
    with pytest.raises(ValueError, match="names to verify"):
        UpstreamTls(sni="api.example.com")


def test_pods_with_app_protocol_https_need_a_backend_tls_policy() -> None:
    dag = build_text(
        GATEWAY, service("web", 443, app_protocol="https"), http_route("r", "web", 443)
    )

    assert dag.clusters == {}
    resolved = parent_conditions(dag)["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "UnsupportedProtocol")
    assert "needs a BackendTLSPolicy" in resolved["message"]


def test_pods_on_port_443_without_app_protocol_stay_cleartext() -> None:
    dag = build_text(GATEWAY, service("web", 443), http_route("r", "web", 443))

    cluster = dag.clusters["default/web/443"]
    assert isinstance(cluster, EdsCluster) and cluster.tls is None


def test_grpc_over_tls_is_http2_by_alpn_in_a_cluster_of_its_own() -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "grpc.example.com", 443),
        http_route("r", "ext", 443, kind="GRPCRoute"),
    )

    cluster = dag.clusters["default/ext/443/h2"]
    assert isinstance(cluster, DnsCluster)
    assert (cluster.protocol, cluster.tls) == (H2, AUTO)


POLICY = """
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: tls, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  targetRefs: [{group: "", kind: Service, name: TARGET}]
  validation:
    hostname: secure.example.com
    wellKnownCACertificates: System
"""


def test_a_backend_tls_policy_wins_over_the_automatic_tls() -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "api.example.com", 8080, app_protocol="http"),
        http_route("r", "ext", 8080),
        POLICY.replace("TARGET", "ext"),
    )

    [cluster] = dag.clusters.values()
    assert isinstance(cluster, DnsCluster)
    assert cluster.tls == UpstreamTls(
        sni="secure.example.com",
        subject_alt_names=(SubjectAltNameMatch("DNS", "secure.example.com"),),
        trusted_ca=None,
        policy=cluster.tls.policy if cluster.tls else None,
    )


def test_a_backend_tls_policy_gives_pods_tls() -> None:
    dag = build_text(
        GATEWAY,
        service("web", 443, app_protocol="https"),
        http_route("r", "web", 443),
        POLICY.replace("TARGET", "web"),
    )

    cluster = dag.clusters["default/web/443"]
    assert isinstance(cluster, EdsCluster)
    assert cluster.tls is not None and cluster.tls.sni == "secure.example.com"


# --- in-cluster first, external fallback -----------------------------------------------------

PREFER = {"dragoman.dev/prefer-service": "web"}


def test_an_external_name_preferring_a_pod_backed_service_is_an_aggregate() -> None:
    dag = build_text(
        GATEWAY,
        service("web", 443),
        external_service("ext", "api.example.com", annotations=PREFER),
        ROUTE_TO_EXT,
    )

    aggregate = dag.clusters["default/ext/443"]
    assert isinstance(aggregate, AggregateCluster)
    assert aggregate.children[0].name == "default/web/443"
    assert aggregate.children[-1].name == "default/ext/443/external"
    assert aggregate.children[-1].hostname == "api.example.com"
    assert aggregate.children[-1].tls == AUTO
    # Both children are clusters of the DAG and of every group that serves the aggregate.
    assert set(dag.clusters) == {"default/ext/443", "default/web/443", "default/ext/443/external"}
    for group in dag.groups.values():
        assert set(group.clusters) == set(dag.clusters)
    # The in-cluster endpoints come through EDS like any pod-backed Service's.
    assert list(dag.load_assignments) == ["default/web/443"]
    assert route_problems(dag) == []


def test_the_aggregate_follows_a_forced_protocol() -> None:
    dag = build_text(
        GATEWAY,
        service("web", 443),
        external_service("ext", "api.example.com", annotations=PREFER),
        http_route("r", "ext", 443, kind="GRPCRoute"),
    )

    aggregate = dag.clusters["default/ext/443/h2c"]
    assert isinstance(aggregate, AggregateCluster)
    assert aggregate.children[0].name == "default/web/443/h2c"
    assert aggregate.children[-1].name == "default/ext/443/external/h2"  # TLS: h2 by ALPN


PREFERENCE_PROBLEMS = [
    ("", "not found"),
    ("missing", "Service default/missing not found"),
    ("other", "is an ExternalName, not pod-backed"),
    ("web80", "does not declare port 443"),
]


@pytest.mark.parametrize(("preferred", "words"), PREFERENCE_PROBLEMS)
def test_a_preference_that_cannot_be_followed_serves_the_external_name_and_says_so(
    preferred: str, words: str
) -> None:
    dag = build_text(
        GATEWAY,
        service("web80", 80),
        external_service("other", "other.example.com"),
        external_service(
            "ext", "api.example.com", annotations={"dragoman.dev/prefer-service": preferred}
        ),
        ROUTE_TO_EXT,
    )

    assert isinstance(dag.clusters["default/ext/443"], DnsCluster)
    [problem] = route_problems(dag)
    assert problem.message.startswith(
        "Service default/ext annotation dragoman.dev/prefer-service: "
    )
    assert words in problem.message
    assert problem.message.endswith("serving the external name only")


@pytest.mark.parametrize(
    ("port_name", "kind", "expected"),
    [
        ("web", "HTTPRoute", "default/ext/web"),
        ("grpc", "GRPCRoute", "default/ext/grpc/h2c"),
        ("", "HTTPRoute", "default/ext/{number}"),  # an unnamed port: its number is all there is
    ],
)
def test_an_external_name_cluster_is_named_for_its_port_name(
    port_name: str, kind: str, expected: str
) -> None:
    # A new port number keeps the name: Envoy then updates the cluster in place and keeps
    # the old one serving until the new one has resolved.
    for number in (8080, 9090):
        dag = build_text(
            GATEWAY,
            external_service("ext", "api.example.com", number, port_name=port_name),
            http_route("r", "ext", number, kind=kind),
        )
        names = [name for name in dag.clusters if name.startswith("default/ext/")]
        assert names == [expected.format(number=number)]


def test_every_cluster_says_whether_it_is_served_over_eds() -> None:
    key = ObjectKey("Service", "default", "svc")
    pods = EdsCluster("default/svc/80", key, 80, 8080)
    resolved_by_envoy = DnsCluster("default/ext/80", key, "api.example.com", 80)
    checked = DnsCluster("default/ext/80", key, "api.example.com", 80, checked=True)
    fixed = DnsCluster("default/ext/80", key, "api.example.com", 80, addresses=("192.0.2.1",))
    aggregate = AggregateCluster("default/ext/80", key, (pods, resolved_by_envoy))
    assert pods.served_over_eds and checked.served_over_eds and fixed.served_over_eds
    assert not resolved_by_envoy.served_over_eds and not aggregate.served_over_eds
