"""A DAG with every upstream kind the translation emits: TLS (automatic and by policy, HTTP/1.1
or HTTP/2 by ALPN), per-backend DNS settings, STRICT and LOGICAL DNS, an aggregate."""

from __future__ import annotations

from dragoman.dag.model import (
    ALL_GATEWAYS,
    H1,
    H2,
    H2C,
    AggregateCluster,
    Backend,
    Dag,
    DnsCluster,
    DnsSettings,
    EdsCluster,
    Forward,
    HappyEyeballs,
    HttpListener,
    LbEndpoint,
    LoadAssignment,
    Locality,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    SubjectAltNameMatch,
    UpstreamTls,
    VirtualHost,
)
from dragoman.objects import ObjectKey

WEB = ObjectKey("Service", "default", "web")
API = ObjectKey("Service", "default", "api")
LEGACY = ObjectKey("Service", "default", "legacy")
PARTNER = ObjectKey("XBackend", "default", "partner")
ROUTE = ObjectKey("HTTPRoute", "default", "upstreams")
POLICY = ObjectKey("BackendTLSPolicy", "default", "api-tls")

# A CA certificate as PEM text; its content is never parsed by the translation.
INLINE_CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

POLICY_TLS = UpstreamTls(
    sni="secure.example.com",
    subject_alt_names=(
        SubjectAltNameMatch("DNS", "secure.example.com"),
        SubjectAltNameMatch("URI", "spiffe://example.com/ns/default/sa/api"),
    ),
    trusted_ca=INLINE_CA,
    policy=POLICY,
)
TUNED_DNS = DnsSettings(
    lookup_family="ALL",
    refresh_s=10,
    respect_ttl=False,
    failure_base_s=2,
    failure_max_s=20,
    jitter_s=0.5,
    resolvers=(("127.0.0.1", 5353), ("::1", 53)),
    logical=True,
    happy_eyeballs=HappyEyeballs("V6", 2),
)


def upstream_clusters(
    with_ca: bytes = INLINE_CA,
) -> dict[str, EdsCluster | DnsCluster | AggregateCluster]:
    web_tls = EdsCluster(
        "default/web/443", WEB, 443, 8443, "https", tls=UpstreamTls(
            sni="web.example.com",
            subject_alt_names=(SubjectAltNameMatch("DNS", "web.example.com"),),
            trusted_ca=with_ca,
        )
    )  # fmt: skip
    auto = DnsCluster("default/api/443", API, "api.example.com", 443, tls=UpstreamTls())
    by_policy = DnsCluster(
        "default/api/8443/h2",
        API,
        "api.example.com",
        8443,
        protocol=H2,
        tls=UpstreamTls(POLICY_TLS.sni, POLICY_TLS.subject_alt_names, with_ca, POLICY_TLS.policy),
    )
    tuned = DnsCluster("default/api/80", API, "api.example.com", 80, dns=TUNED_DNS)
    cleartext_h2 = DnsCluster("default/api/80/h2c", API, "api.example.com", 80, protocol=H2C)
    fallback = DnsCluster(
        "default/legacy/443/external", LEGACY, "legacy.example.com", 443, tls=UpstreamTls()
    )
    aggregate = AggregateCluster("default/legacy/443", LEGACY, (web_tls, fallback))
    # An XBackend's protocol HTTP11 over TLS: ALPN http/1.1 alone.
    http11 = DnsCluster(
        "xbackend/default/partner/443/h1",
        PARTNER,
        "api.partner.example",
        443,
        protocol=H1,
        tls=UpstreamTls(),
    )
    made = (web_tls, auto, by_policy, tuned, cleartext_h2, fallback, aggregate, http11)
    return {c.name: c for c in made}


def upstream_kinds_dag(with_ca: bytes = INLINE_CA) -> Dag:
    clusters = upstream_clusters(with_ca)
    routed = ["default/api/443", "default/api/8443/h2", "default/api/80", "default/legacy/443"]
    routes = tuple(
        Route(RouteMatch("PathPrefix", f"/{index}"), Forward((Backend(name, 1),)), ROUTE, index)
        for index, name in enumerate(
            [*routed, "default/api/80/h2c", "xbackend/default/partner/443/h1"]
        )
    )
    table = RouteTable("http-8080", (VirtualHost("*", ("*",), routes),))
    listener = HttpListener("http-8080", 8080, table.name)
    group = NodeGroup(ALL_GATEWAYS, (listener,), (table,), tuple(sorted(clusters)))
    web = LoadAssignment("default/web/443", (Locality("", (LbEndpoint("10.0.0.1", 8443),)),))
    return Dag(groups={ALL_GATEWAYS: group}, clusters=clusters, load_assignments={web.cluster: web})
