"""CredentialInjector ExtensionRefs in the DAG: the credential a rule's routes and their
listener carry, the 500 (and the reason on the route and the injector) when it cannot be
read, and the value kept out of every problem, status and repr."""

from __future__ import annotations

import json

import pytest

from dragoman.dag.model import (
    Dag,
    DirectResponse,
    Forward,
    HttpListener,
    HttpsListener,
    InjectedCredential,
    Route,
)
from dragoman.objects import CredentialInjector, CredentialSecretRef
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object
from tests.support.builders import (
    backend_ref,
    gateway,
    gateway_class,
    grpc_route,
    http_route,
    listener,
    match,
    rule,
    secret,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.credentials import VALUE, WORLD, credential_injector, injector_route, injects
from tests.support.routing_sim import Request, route_for
from tests.support.status_builds import build_text, condition, status


def served(dag: Dag, path: str) -> Route:
    route = route_for(dag, Request("any", path), 8080)
    assert route is not None
    return route


def route_problems(dag: Dag) -> list[tuple[str, str]]:
    return [(p.field, p.reason) for p in dag.problems if p.object.kind == "HTTPRoute"]


def assert_value_nowhere(dag: Dag) -> None:
    shown = json.dumps([s.status for s in dag.statuses.values()]) + repr(dag)
    shown += "".join(str(p) for p in dag.problems)
    assert VALUE.decode() not in shown and "s3cr3t" not in shown


def test_the_rule_carries_the_credential_and_its_listener_a_filter_for_it() -> None:
    dag = build_text(
        *WORLD,
        credential_injector("api-key", "api-key", "token", header="X-Api-Key", overwrite=True),
        injector_route("api-key"),
    )
    expected = InjectedCredential("default/api-key", "X-Api-Key", True, VALUE)
    injected = served(dag, "/api")
    assert isinstance(injected.action, Forward)
    assert injected.credentials == (expected,)
    assert served(dag, "/plain").credentials == ()
    [http] = dag.groups["default/gw"].listeners
    assert isinstance(http, HttpListener) and http.credentials == (expected,)
    assert route_problems(dag) == []
    conditions = status(dag, "CredentialInjector", "api-key")["conditions"]
    assert condition(conditions, "Accepted") == ("True", "Accepted")
    assert condition(conditions, "ResolvedRefs") == ("True", "ResolvedRefs")
    assert_value_nowhere(dag)


def test_the_header_defaults_to_authorization_without_overwriting() -> None:
    dag = build_text(
        *WORLD, credential_injector("api-key", "api-key", "token"), injector_route("api-key")
    )
    [credential] = served(dag, "/api").credentials
    assert (credential.header, credential.overwrite) == ("Authorization", False)


@pytest.mark.parametrize(
    ("injector", "field", "reason"),
    [
        (None, "", ""),  # no injector at all
        (
            credential_injector("api-key", "missing", "token"),
            "spec.secretRef.name",
            "SecretNotFound",
        ),
        (credential_injector("api-key", "api-key", "nope"), "spec.secretRef.key", "SecretNotFound"),
        (
            credential_injector("api-key", "api-key", "bad"),
            "spec.secretRef.key",
            "InvalidCredential",
        ),
        (
            credential_injector("api-key", "api-key", "empty"),
            "spec.secretRef.key",
            "InvalidCredential",
        ),
        (
            credential_injector("api-key", "api-key", "token", secret_namespace="other"),
            "spec.secretRef.namespace",
            "RefNotPermitted",
        ),
    ],
    ids=["no-injector", "no-secret", "no-key", "newline", "empty", "other-namespace"],
)
def test_a_credential_that_cannot_be_read_makes_the_rule_answer_500(
    injector: dict[str, object] | None, field: str, reason: str
) -> None:
    dag = build_text(*WORLD, *([injector] if injector else []), injector_route("api-key"))
    assert served(dag, "/api").action == DirectResponse(500)
    assert isinstance(served(dag, "/plain").action, Forward)  # the rest is served
    assert route_problems(dag) == [
        ("spec.rules[0].filters[0].extensionRef", "InvalidCredentialInjector")
    ]
    [problem] = [p for p in dag.problems if p.object.kind == "HTTPRoute"]
    assert field in problem.message and "answer 500" in problem.message
    route_status = status(dag, "HTTPRoute", "r")["parents"][0]["conditions"]
    assert condition(route_status, "ResolvedRefs") == ("False", "InvalidCredentialInjector")
    [http] = dag.groups["default/gw"].listeners
    assert isinstance(http, HttpListener) and http.credentials == ()
    if injector is not None:
        conditions = status(dag, "CredentialInjector", "api-key")["conditions"]
        assert condition(conditions, "Accepted") == ("True", "Accepted")
        assert condition(conditions, "ResolvedRefs") == ("False", reason)
        [resolved] = [c for c in conditions if c["type"] == "ResolvedRefs"]
        assert resolved["message"].startswith(field)
    assert_value_nowhere(dag)


def test_a_value_over_envoys_header_limit_is_refused_naming_the_key() -> None:
    big = secret("api-key", {"token": b"k" * 16385})
    dag = build_text(
        *WORLD[:3],
        big,
        credential_injector("api-key", "api-key", "token"),
        injector_route("api-key"),
    )
    assert served(dag, "/api").action == DirectResponse(500)
    conditions = status(dag, "CredentialInjector", "api-key")["conditions"]
    assert condition(conditions, "ResolvedRefs") == ("False", "InvalidCredential")
    [resolved] = [c for c in conditions if c["type"] == "ResolvedRefs"]
    assert "spec.secretRef.key" in resolved["message"] and "16384" in resolved["message"]


def test_a_host_header_is_not_accepted() -> None:
    dag = build_text(
        *WORLD,
        credential_injector("api-key", "api-key", "token", header="Host"),
        injector_route("api-key"),
    )
    assert served(dag, "/api").action == DirectResponse(500)
    conditions = status(dag, "CredentialInjector", "api-key")["conditions"]
    assert condition(conditions, "Accepted") == ("False", "Invalid")


def test_an_injector_in_another_namespace_is_not_found() -> None:
    elsewhere = credential_injector("api-key", "api-key", "token", namespace="other")
    dag = build_text(
        *WORLD,
        secret("api-key", {"token": VALUE}, namespace="other"),
        elsewhere,
        injector_route("api-key"),
    )
    assert served(dag, "/api").action == DirectResponse(500)
    [problem] = [p for p in dag.problems if p.object.kind == "HTTPRoute"]
    assert "CredentialInjector default/api-key not found" in problem.message


def test_two_injectors_on_one_rule_and_one_shared_by_two_rules() -> None:
    dag = build_text(
        *WORLD,
        credential_injector("api-key", "api-key", "token"),
        credential_injector("tenant", "api-key", "token", header="X-Tenant"),
        http_route(
            "r",
            rules=[
                rule(backend_ref("web", 80), matches=[match("/a")], filters=[injects("api-key")]),
                rule(
                    backend_ref("web", 80),
                    matches=[match("/b")],
                    filters=[injects("api-key"), injects("tenant")],
                ),
            ],
        ),
    )
    assert [c.name for c in served(dag, "/a").credentials] == ["default/api-key"]
    assert [c.name for c in served(dag, "/b").credentials] == ["default/api-key", "default/tenant"]
    [http] = dag.groups["default/gw"].listeners
    assert isinstance(http, HttpListener)
    assert [c.name for c in http.credentials] == ["default/api-key", "default/tenant"]


def test_an_https_listener_chain_carries_the_credentials_of_its_routes() -> None:
    authority = certificate_authority("credentials")
    pair = authority.issue("api.example.com")
    dag = build_text(
        gateway_class(),
        gateway(
            listeners=[listener("https", 443, "HTTPS", tls={"certificateRefs": [{"name": "cert"}]})]
        ),
        tls_secret("cert", pair.certificate, pair.private_key),
        *WORLD[2:],
        credential_injector("api-key", "api-key", "token"),
        injector_route("api-key"),
    )
    [https] = dag.groups["default/gw"].listeners
    assert isinstance(https, HttpsListener)
    assert [c.name for c in https.filter_chains[0].credentials] == ["default/api-key"]


def test_an_extension_of_another_kind_is_still_unsupported() -> None:
    other = {"type": "ExtensionRef", "extensionRef": {"group": "x.io", "kind": "Auth", "name": "a"}}
    dag = build_text(
        *WORLD,
        http_route(
            "r", rules=[rule(backend_ref("web", 80), matches=[match("/api")], filters=[other])]
        ),
    )
    assert served(dag, "/api").action == DirectResponse(500)
    assert route_problems(dag) == [("spec.rules[0].filters[0].type", "UnsupportedValue")]


def test_the_credential_is_never_in_a_repr() -> None:
    credential = InjectedCredential("default/a", "Authorization", False, VALUE)
    assert "s3cr3t" not in repr(credential)


def test_parsing_reads_every_field_and_refuses_bad_ones() -> None:
    parsed = parse_object(
        credential_injector("a", "api-key", "token", header="X-Api-Key", overwrite=True)
    )
    assert isinstance(parsed, CredentialInjector)
    assert parsed.secret_ref == CredentialSecretRef("api-key", "token")
    assert (parsed.header, parsed.overwrite) == ("X-Api-Key", True)
    for bad, field in (
        (credential_injector("a", "api-key", "to ken"), "spec.secretRef.key"),
        (credential_injector("a", "Api_Key", "token"), "spec.secretRef.name"),
        (credential_injector("a", "api-key", "token", header="X Api"), "spec.header"),
        ({**credential_injector("a", "s", "k"), "spec": {"header": "X"}}, "spec.secretRef"),
    ):
        with pytest.raises(ObjectError) as error:
            parse_object(bad)
        assert field in str(error.value)


def test_an_extension_ref_needs_its_group_kind_and_name() -> None:
    route = http_route(
        "r",
        rules=[
            rule(
                backend_ref("web", 80),
                filters=[{"type": "ExtensionRef", "extensionRef": {"group": "dragoman.dev"}}],
            )
        ],
    )
    with pytest.raises(ObjectError) as error:
        parse_object(route)
    assert "extensionRef.kind" in str(error.value) and "extensionRef.name" in str(error.value)


def test_a_grpc_route_rule_injects_too() -> None:
    dag = build_text(
        *WORLD,
        credential_injector("api-key", "api-key", "token"),
        grpc_route("rpc", rules=[rule(backend_ref("web", 80), filters=[injects("api-key")])]),
    )
    [table] = dag.groups["default/gw"].route_tables
    [route] = [r for host in table.virtual_hosts for r in host.routes]
    assert route.match.grpc and [c.name for c in route.credentials] == ["default/api-key"]
    [http] = dag.groups["default/gw"].listeners
    assert isinstance(http, HttpListener) and [c.name for c in http.credentials] == [
        "default/api-key"
    ]
