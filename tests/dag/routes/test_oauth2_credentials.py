"""OAuth2 CredentialInjectors in the DAG: the grant a rule's routes carry, the token
endpoint's cluster served wherever they are (and checked by the DNS check), every way the
token endpoint or the client secret can be refused (the rule answers 500, the injector says
why, naming the field), and the client secret kept out of every problem, status and repr."""

from __future__ import annotations

import json

import pytest

from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.model import (
    Dag,
    DirectResponse,
    DnsCluster,
    Forward,
    HttpListener,
    InjectedCredential,
    OAuth2Grant,
    Route,
)
from dragoman.dag.options import BuildOptions
from dragoman.objects import CredentialInjector, OAuth2ClientCredentials
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object
from tests.support.builders import (
    external_service,
    gateway,
    secret,
    service,
    tls_secret,
    xbackend,
)
from tests.support.certificates import certificate_authority
from tests.support.credentials import (
    CLIENT_SECRET,
    IDP,
    VALUE,
    WORLD,
    credential_injector,
    injector_route,
    oauth2_injector,
)
from tests.support.routing_sim import Request, route_for
from tests.support.status_builds import build_text, condition, status

TOKEN_FIELD = "spec.oauth2.tokenEndpoint.backendRef"


def served(dag: Dag, path: str) -> Route:
    route = route_for(dag, Request("any", path), 8080)
    assert route is not None
    return route


def injector_conditions(dag: Dag, name: str = "tok") -> dict[str, tuple[str, str]]:
    conditions = status(dag, "CredentialInjector", name)["conditions"]
    return {c["type"]: condition(conditions, c["type"]) for c in conditions}


def injector_message(dag: Dag, type_: str, name: str = "tok") -> str:
    conditions = status(dag, "CredentialInjector", name)["conditions"]
    [found] = [c for c in conditions if c["type"] == type_]
    return str(found["message"])


def assert_secret_nowhere(dag: Dag) -> None:
    shown = json.dumps([s.status for s in dag.statuses.values()]) + repr(dag)
    shown += "".join(str(p) for p in dag.problems)
    assert CLIENT_SECRET.decode() not in shown and "s3cr3t" not in shown


def test_the_rule_carries_the_grant_and_the_token_endpoint_is_served() -> None:
    dag = build_text(
        *WORLD,
        *IDP,
        oauth2_injector(
            "tok",
            scopes=["read", "write:orders"],
            tokenFetchRetryInterval="3s",
            tokenEndpoint={
                "backendRef": {"name": "idp", "port": 443},
                "path": "/oauth2/v2.0/token",
                "timeout": "2500ms",
            },
        ),
        injector_route("tok"),
    )
    expected = InjectedCredential(
        "default/tok",
        "Authorization",
        False,
        CLIENT_SECRET,
        OAuth2Grant(
            token_uri="https://auth.example.com/oauth2/v2.0/token",
            cluster="default/idp/443",
            timeout_ms=2500,
            client_id="dragoman",
            scopes=("read", "write:orders"),
            retry_interval_ms=3000,
        ),
    )
    injected = served(dag, "/api")
    assert isinstance(injected.action, Forward)
    assert injected.credentials == (expected,)
    assert served(dag, "/plain").credentials == ()
    group = dag.groups["default/gw"]
    [http] = group.listeners
    assert isinstance(http, HttpListener) and http.credentials == (expected,)
    # Not a route's backend, yet in CDS for the listener whose routes fetch through it.
    assert "default/idp/443" in group.clusters
    token_cluster = dag.clusters["default/idp/443"]
    assert isinstance(token_cluster, DnsCluster) and token_cluster.tls is not None
    assert injector_conditions(dag) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }
    assert [p for p in dag.problems if p.object.kind == "HTTPRoute"] == []
    assert_secret_nowhere(dag)


def test_defaults_five_seconds_and_envoys_retry_interval() -> None:
    dag = build_text(*WORLD, *IDP, oauth2_injector("tok"), injector_route("tok"))
    [credential] = served(dag, "/api").credentials
    assert credential.oauth2 == OAuth2Grant(
        token_uri="https://auth.example.com/oauth2/token",
        cluster="default/idp/443",
        timeout_ms=5000,
        client_id="dragoman",
    )


def test_a_pod_backed_service_is_reached_by_its_cluster_name() -> None:
    dag = build_text(
        *WORLD,
        *IDP[1:],
        service("idp", 80, 9000),
        oauth2_injector("tok", backend={"name": "idp", "port": 80}),
        injector_route("tok"),
    )
    [credential] = served(dag, "/api").credentials
    assert credential.oauth2 is not None
    assert credential.oauth2.token_uri == "http://idp.default.svc.cluster.local/oauth2/token"
    assert credential.oauth2.cluster in dag.groups["default/gw"].clusters


def test_an_xbackend_token_endpoint() -> None:
    dag = build_text(
        *WORLD,
        *IDP[1:],
        xbackend("idp", "login.example.com", 8443, tls={"mode": "ServerOnly"}),
        oauth2_injector(
            "tok",
            backend={"group": "gateway.networking.x-k8s.io", "kind": "XBackend", "name": "idp"},
        ),
        injector_route("tok"),
    )
    [credential] = served(dag, "/api").credentials
    assert credential.oauth2 is not None
    assert credential.oauth2.token_uri == "https://login.example.com:8443/oauth2/token"
    assert credential.oauth2.cluster in dag.groups["default/gw"].clusters


def test_the_dns_check_resolves_the_token_endpoint_too() -> None:
    options = BuildOptions(dns_check=True)
    documents = (
        *WORLD[:2],
        external_service("web", "api.example.com", 80),
        *IDP,
        oauth2_injector("tok"),
        injector_route("tok"),
    )
    pending = build_text(*documents, options=options)
    assert pending.dns_hostnames == ("api.example.com", "auth.example.com")
    dns = {
        "api.example.com": DnsObservation(addresses=("203.0.113.7",)),
        "auth.example.com": DnsObservation(addresses=("203.0.113.9",)),
    }
    dag = build_text(*documents, options=options, dns=dns)
    token_cluster = dag.clusters["default/idp/443"]
    assert isinstance(token_cluster, DnsCluster) and token_cluster.checked
    [locality] = dag.load_assignments["default/idp/443"].localities
    assert [(e.address, e.hostname) for e in locality.endpoints] == [
        ("203.0.113.9", "auth.example.com")
    ]


@pytest.mark.parametrize(
    ("documents", "field", "reason"),
    [
        ((IDP[1], oauth2_injector("tok")), TOKEN_FIELD, "BackendNotFound"),
        (
            (IDP[1], external_service("idp", "localhost", 443), oauth2_injector("tok")),
            TOKEN_FIELD,
            "UnsafeExternalName",
        ),
        (
            (*IDP, oauth2_injector("tok", backend={"name": "idp", "port": 80})),
            f"{TOKEN_FIELD}.port",
            "BackendNotFound",
        ),
        (
            (*IDP, oauth2_injector("tok", backend={"name": "idp", "port": 443, "namespace": "x"})),
            f"{TOKEN_FIELD}.namespace",
            "RefNotPermitted",
        ),
        ((IDP[0], oauth2_injector("tok")), "spec.oauth2.clientSecretRef.name", "SecretNotFound"),
        (
            (*IDP, oauth2_injector("tok", key="nope")),
            "spec.oauth2.clientSecretRef.key",
            "SecretNotFound",
        ),
        (
            (*IDP, oauth2_injector("tok", key="bad")),
            "spec.oauth2.clientSecretRef.key",
            "InvalidCredential",
        ),
    ],
    ids=[
        "no-service",
        "unsafe-name",
        "no-such-port",
        "other-namespace",
        "no-secret",
        "no-key",
        "newline",
    ],
)
def test_a_refused_token_endpoint_or_secret_makes_the_rule_answer_500(
    documents: tuple[dict[str, object], ...], field: str, reason: str
) -> None:
    dag = build_text(*WORLD, *documents, injector_route("tok"))
    assert served(dag, "/api").action == DirectResponse(500)
    assert isinstance(served(dag, "/plain").action, Forward)
    conditions = injector_conditions(dag)
    assert conditions["Accepted"] == ("True", "Accepted")
    assert conditions["ResolvedRefs"] == ("False", reason)
    assert injector_message(dag, "ResolvedRefs").startswith(field)
    route_status = status(dag, "HTTPRoute", "r")["parents"][0]["conditions"]
    assert condition(route_status, "ResolvedRefs") == ("False", "InvalidCredentialInjector")
    group = dag.groups["default/gw"]
    [http] = group.listeners
    assert isinstance(http, HttpListener) and http.credentials == ()
    assert group.clusters == ("default/web/80",)  # no token endpoint without its rule
    assert_secret_nowhere(dag)


def test_overwrite_applies_to_the_token() -> None:
    injector = oauth2_injector("tok")
    injector["spec"]["overwrite"] = True
    dag = build_text(*WORLD, *IDP, injector, injector_route("tok"))
    [credential] = served(dag, "/api").credentials
    assert credential.overwrite and credential.oauth2 is not None


def test_static_and_oauth2_injectors_on_one_rule() -> None:
    dag = build_text(
        *WORLD,
        *IDP,
        credential_injector("api-key", "api-key", "token", header="X-Api-Key"),
        oauth2_injector("tok"),
        injector_route("api-key", "tok"),
    )
    credentials = served(dag, "/api").credentials
    assert [(c.name, c.oauth2 is not None) for c in credentials] == [
        ("default/api-key", False),
        ("default/tok", True),
    ]
    assert VALUE != CLIENT_SECRET


def test_the_client_secret_is_never_in_a_repr() -> None:
    dag = build_text(*WORLD, *IDP, oauth2_injector("tok"), injector_route("tok"))
    assert "s3cr3t" not in repr(served(dag, "/api").credentials)


def test_parsing_reads_every_field() -> None:
    parsed = parse_object(
        oauth2_injector(
            "tok",
            scopes=["a", "b:c"],
            tokenFetchRetryInterval="1m",
            tokenEndpoint={
                "backendRef": {"name": "idp", "port": 443},
                "path": "/token",
                "timeout": "10s",
            },
        )
    )
    assert isinstance(parsed, CredentialInjector) and parsed.secret_ref is None
    oauth2 = parsed.oauth2
    assert isinstance(oauth2, OAuth2ClientCredentials)
    assert (oauth2.client_id, oauth2.scopes) == ("dragoman", ("a", "b:c"))
    assert oauth2.token_fetch_retry_interval_s == 60.0
    assert (oauth2.client_secret_ref.name, oauth2.client_secret_ref.key) == (
        "oauth-client",
        "secret",
    )
    endpoint = oauth2.token_endpoint
    assert (endpoint.backend_ref.name, endpoint.backend_ref.port) == ("idp", 443)
    assert (endpoint.path, endpoint.timeout_s) == ("/token", 10.0)


def _with_spec(spec: dict[str, object]) -> dict[str, object]:
    return {**oauth2_injector("tok"), "spec": spec}


@pytest.mark.parametrize(
    ("injector", "field"),
    [
        (oauth2_injector("tok", clientID=""), "spec.oauth2.clientID"),
        (oauth2_injector("tok", clientID="my client"), "spec.oauth2.clientID"),
        (oauth2_injector("tok", clientID=None), "spec.oauth2.clientID"),
        (oauth2_injector("tok", scopes=["read write"]), "spec.oauth2.scopes[0]"),
        (oauth2_injector("tok", scopes=['a"b']), "spec.oauth2.scopes[0]"),
        (oauth2_injector("tok", scopes=["s"] * 33), "spec.oauth2.scopes"),
        (oauth2_injector("tok", tokenFetchRetryInterval="-1s"), "tokenFetchRetryInterval"),
        (oauth2_injector("tok", tokenFetchRetryInterval="500ms"), "tokenFetchRetryInterval"),
        (oauth2_injector("tok", clientSecretRef=None), "spec.oauth2.clientSecretRef"),
        (oauth2_injector("tok", clientSecretRef={"name": "s"}), "clientSecretRef.key"),
        (oauth2_injector("tok", tokenEndpoint=None), "spec.oauth2.tokenEndpoint"),
        (oauth2_injector("tok", path=None), "spec.oauth2.tokenEndpoint.path"),
        (oauth2_injector("tok", path="token"), "spec.oauth2.tokenEndpoint.path"),
        (oauth2_injector("tok", path="/a b"), "spec.oauth2.tokenEndpoint.path"),
        (
            oauth2_injector("tok", backend={"name": "idp"}),
            "spec.oauth2.tokenEndpoint.backendRef.port",
        ),
        (
            oauth2_injector(
                "tok",
                tokenEndpoint={
                    "backendRef": {"name": "i", "port": 1},
                    "path": "/",
                    "timeout": "0s",
                },
            ),
            "spec.oauth2.tokenEndpoint.timeout",
        ),
        (
            oauth2_injector(
                "tok",
                tokenEndpoint={"backendRef": {"name": "i", "port": 1}, "path": "/", "timeout": "x"},
            ),
            "spec.oauth2.tokenEndpoint.timeout",
        ),
        (
            _with_spec(
                {
                    **oauth2_injector("tok")["spec"],
                    "secretRef": {"name": "api-key", "key": "token"},
                }
            ),
            "exactly one of secretRef and oauth2",
        ),
        (_with_spec({"header": "Authorization"}), "exactly one of secretRef and oauth2"),
        (_with_spec({**oauth2_injector("tok")["spec"], "header": "X-Token"}), "spec.header"),
    ],
)
def test_parsing_refuses_bad_values_naming_the_field(
    injector: dict[str, object], field: str
) -> None:
    with pytest.raises(ObjectError) as error:
        parse_object(injector)
    assert field in str(error.value)


def test_a_secret_holding_the_client_secret_may_change() -> None:
    rotated = secret("oauth-client", {"secret": b"another-s3cr3t"})
    dag = build_text(*WORLD, IDP[0], rotated, oauth2_injector("tok"), injector_route("tok"))
    [credential] = served(dag, "/api").credentials
    assert credential.value == b"another-s3cr3t"


def test_a_gateways_client_certificate_is_presented_to_the_token_endpoint_too() -> None:
    client = certificate_authority().issue("gateway.example.com")
    presenting = {"backend": {"clientCertificateRef": {"name": "client"}}}
    dag = build_text(
        WORLD[0],
        gateway(tls=presenting),
        *WORLD[2:],
        *IDP,
        tls_secret("client", client.certificate, client.private_key),
        oauth2_injector("tok"),
        injector_route("tok"),
    )
    variant = "default/idp/443/client-certificate/default/client"
    group = dag.groups["default/gw"]
    assert variant in group.clusters and "default/idp/443" not in group.clusters
    [http] = group.listeners
    assert isinstance(http, HttpListener)
    assert [c.oauth2.cluster for c in http.credentials if c.oauth2] == [variant]
    assert [c.oauth2.cluster for c in served(dag, "/api").credentials if c.oauth2] == [variant]


def test_what_of_the_token_endpoint_is_not_served_as_asked_is_said_on_the_injector() -> None:
    annotated = external_service(
        "idp", "auth.example.com", 443, annotations={"dragoman.dev/dns-respect-ttl": "sometimes"}
    )
    dag = build_text(*WORLD, IDP[1], annotated, oauth2_injector("tok"), injector_route("tok"))
    assert isinstance(served(dag, "/api").action, Forward)  # served, with the default
    assert injector_conditions(dag)["ResolvedRefs"] == ("True", "ResolvedRefs")
    message = injector_message(dag, "ResolvedRefs")
    assert "not served as asked" in message and "dragoman.dev/dns-respect-ttl" in message
