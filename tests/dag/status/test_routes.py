"""Route status (HTTPRoute, GRPCRoute): Accepted and ResolvedRefs per parentRef, allowedRoutes
(namespaces Same/All/Selector, kinds), ReferenceGrants for backendRefs and ExternalName
aliases, and the status interface other code extends."""

from __future__ import annotations

import pytest

from dragoman.dag.conditions import condition
from dragoman.dag.model import ALL_GATEWAYS, Dag, Forward
from dragoman.dag.options import BuildOptions
from dragoman.dag.status.routes import add_route_condition
from dragoman.dag.status.stamp import stamp
from dragoman.objects import ObjectKey
from tests.support.builders import (
    Object,
    allowed_routes,
    backend_ref,
    external_service,
    gateway,
    gateway_class,
    grpc_route,
    http_route,
    listener,
    namespace_object,
    parent_ref,
    reference_grant,
    rule,
    service,
    service_port,
)
from tests.support.status_builds import (
    CONTROLLER,
    build_text,
    parents,
    route_condition,
)
from tests.support.status_builds import listener as listener_status

WEB = backend_ref("web", 80)
TEAM_WEB = backend_ref("web", 80, namespace="team")
SERVICES = [
    service("web", ports=[service_port(80)]),
    service("web", namespace="team", ports=[service_port(80)]),
    service("dns", ports=[service_port(53, protocol="UDP")]),
    external_service("local", "localhost", 80),
    namespace_object("team", {"access": "gateway"}),
]

HTTP = listener()
ALL = listener(allowed_routes=allowed_routes("All"))
ADMIN = listener("admin", 8080)
GW_DEFAULT = gateway(port=80)
SELECTED = allowed_routes("Selector", selector={"matchLabels": {"access": "gateway"}})
GRANT = reference_grant(
    "allow", "team", from_kind="HTTPRoute", from_namespace="default", to_name="web"
)

ACCEPTED = ("True", "Accepted")
RESOLVED = ("True", "ResolvedRefs")

# (id, manifests, Accepted, ResolvedRefs) of the route's only parent entry
ROUTES = [
    pytest.param(
        [GW_DEFAULT, http_route("r", "web", 80, generation=5)], ACCEPTED, RESOLVED, id="valid"
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route("r", "web", 80, parents=[parent_ref(section="nope")], generation=5),
        ],
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="no listener of that sectionName",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", "web", 80, parents=[parent_ref(port=8080)], generation=5)],
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="no listener on that port",
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route(
                "r", "web", 80, parents=[parent_ref(section="http", port=8080)], generation=5
            ),
        ],
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="sectionName and port do not match",
    ),
    pytest.param(
        [http_route("r", "web", 80, parents=["absent"], generation=5)],
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="missing Gateway (manifest mode)",
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route(
                "r", "web", 80, parents=[parent_ref(kind="Service", group="")], generation=5
            ),
        ],
        ("False", "UnsupportedValue"),
        RESOLVED,
        id="parentRef kind",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", "web", 80, namespace="team", generation=5)],
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="namespace Same refuses another namespace",
    ),
    pytest.param(
        [gateway(listeners=[ALL]), http_route("r", "web", 80, namespace="team", generation=5)],
        ACCEPTED,
        RESOLVED,
        id="namespace All",
    ),
    pytest.param(
        [
            gateway(listeners=[listener(allowed_routes=SELECTED)]),
            http_route("r", "web", 80, namespace="team", generation=5),
        ],
        ACCEPTED,
        RESOLVED,
        id="selector matchLabels",
    ),
    pytest.param(
        [
            gateway(listeners=[listener(allowed_routes=SELECTED)]),
            http_route("r", "web", 80, generation=5),
        ],
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="selector refuses an unlabelled namespace",
    ),
    pytest.param(
        [
            gateway(
                listeners=[
                    listener(
                        allowed_routes=allowed_routes(
                            "Selector",
                            selector={
                                "matchExpressions": [
                                    {
                                        "key": "access",
                                        "operator": "In",
                                        "values": ["gateway", "mesh"],
                                    }
                                ]
                            },
                        )
                    )
                ]
            ),
            http_route("r", "web", 80, namespace="team", generation=5),
        ],
        ACCEPTED,
        RESOLVED,
        id="selector matchExpressions In",
    ),
    pytest.param(
        [
            gateway(
                listeners=[
                    listener(
                        allowed_routes=allowed_routes(
                            "Selector",
                            selector={
                                "matchExpressions": [{"key": "access", "operator": "Exists"}]
                            },
                        )
                    )
                ]
            ),
            http_route("r", "web", 80, generation=5),
        ],
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="selector matchExpressions Exists",
    ),
    pytest.param(
        [
            gateway(
                listeners=[
                    listener(
                        allowed_routes=allowed_routes(
                            "Selector",
                            selector={"matchLabels": {"kubernetes.io/metadata.name": "default"}},
                        )
                    )
                ]
            ),
            http_route("r", "web", 80, generation=5),
        ],
        ACCEPTED,
        RESOLVED,
        id="selector on the name label of a namespace with no Namespace object",
    ),
    pytest.param(
        [
            gateway(listeners=[listener(allowed_routes=allowed_routes(kinds=["GRPCRoute"]))]),
            http_route("r", "web", 80, generation=5),
        ],
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="listener admits only another kind",
    ),
    pytest.param(
        [
            gateway(listeners=[listener("tcp", 9000, "example.com/sctp")]),
            http_route("r", "web", 80, generation=5),
        ],
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="listener of an unsupported protocol",
    ),
    pytest.param(
        [
            gateway(listeners=[listener(hostname="a.example.com")]),
            http_route("r", "web", 80, hostnames=["b.example.com"], generation=5),
        ],
        ("False", "NoMatchingListenerHostname"),
        RESOLVED,
        id="hostnames do not intersect",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", "absent", 80, generation=5)],
        ACCEPTED,
        ("False", "BackendNotFound"),
        id="missing Service",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", "web", 81, generation=5)],
        ACCEPTED,
        ("False", "BackendNotFound"),
        id="port the Service does not declare",
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route("r", rules=[rule(backend_ref("web", 80, kind="ConfigMap"))], generation=5),
        ],
        ACCEPTED,
        ("False", "InvalidKind"),
        id="backendRef kind",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", "dns", 53, generation=5)],
        ACCEPTED,
        ("False", "UnsupportedProtocol"),
        id="UDP port",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", "local", 80, generation=5)],
        ACCEPTED,
        ("False", "UnsafeExternalName"),
        id="unsafe ExternalName",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", rules=[rule(TEAM_WEB)], generation=5)],
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="cross-namespace backend without a grant",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", rules=[rule(TEAM_WEB)], generation=5), GRANT],
        ACCEPTED,
        RESOLVED,
        id="cross-namespace backend granted by name",
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route("r", rules=[rule(TEAM_WEB)], generation=5),
            reference_grant("allow", "team", from_kind="HTTPRoute", from_namespace="default"),
        ],
        ACCEPTED,
        RESOLVED,
        id="cross-namespace backend, every Service granted",
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route("r", rules=[rule(TEAM_WEB)], generation=5),
            reference_grant(
                "allow", "team", from_kind="Gateway", from_namespace="default", to_name="web"
            ),
        ],
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="grant from another kind",
    ),
    pytest.param(
        [
            GW_DEFAULT,
            http_route("r", rules=[rule(TEAM_WEB)], generation=5),
            reference_grant(
                "allow", "team", from_kind="HTTPRoute", from_namespace="default", to_name="other"
            ),
        ],
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="grant to another name",
    ),
    pytest.param(
        [GW_DEFAULT, http_route("r", rules=[rule(WEB, TEAM_WEB)], generation=5)],
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="one invalid backend of two",
    ),
]


@pytest.mark.parametrize(("manifests", "accepted", "resolved"), ROUTES)
def test_route_conditions(
    manifests: list[Object], accepted: tuple[str, str], resolved: tuple[str, str]
) -> None:
    dag = build_text(*SERVICES, *manifests)
    [namespace] = [key.namespace for key in dag.statuses if key.kind == "HTTPRoute"]
    [entry] = parents(dag, "r", namespace)
    assert entry["controllerName"] == CONTROLLER
    assert route_condition(dag, "r", "Accepted", namespace) == accepted
    assert route_condition(dag, "r", "ResolvedRefs", namespace) == resolved
    assert all(c["observedGeneration"] == 5 for c in entry["conditions"])


def test_messages_name_the_field_and_what_to_do() -> None:
    dag = build_text(*SERVICES, GW_DEFAULT, http_route("r", rules=[rule(TEAM_WEB)], generation=5))
    [entry] = parents(dag, "r")
    [resolved] = [c for c in entry["conditions"] if c["type"] == "ResolvedRefs"]
    assert resolved["message"].startswith("spec.rules[0].backendRefs[0].namespace: ")
    assert "ReferenceGrant in namespace 'team'" in resolved["message"]


def test_parent_ref_is_echoed_with_defaults() -> None:
    parent = parent_ref(namespace="default", section="http", port=80)
    dag = build_text(
        *SERVICES, GW_DEFAULT, http_route("r", "web", 80, parents=[parent], generation=5)
    )
    [entry] = parents(dag, "r")
    assert entry["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": "default",
        "name": "gw",
        "sectionName": "http",
        "port": 80,
    }
    bare = build_text(*SERVICES, GW_DEFAULT, http_route("r", "web", 80, generation=5))
    assert parents(bare, "r")[0]["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "gw",
    }


def test_parents_of_other_controllers_get_no_entry() -> None:
    dag = build_text(
        *SERVICES,
        gateway_class("theirs", "example.com/another"),
        gateway("their-gw", class_name="theirs", listeners=[HTTP]),
        GW_DEFAULT,
        http_route("r", "web", 80, parents=["gw", "their-gw"], generation=5),
    )
    assert [entry["parentRef"]["name"] for entry in parents(dag, "r")] == ["gw"]


def test_missing_gateway_gets_no_entry_when_classes_are_required() -> None:
    dag = build_text(
        *SERVICES,
        http_route("r", "web", 80, parents=["absent"], generation=5),
        options=BuildOptions(require_gateway_class=True),
    )
    assert parents(dag, "r") == []
    assert [p.reason for p in dag.problems] == ["NoMatchingParent"]  # still logged


def test_one_entry_per_parent_ref() -> None:
    dag = build_text(
        *SERVICES,
        gateway(listeners=[HTTP, ADMIN]),
        http_route(
            "r",
            "web",
            80,
            parents=[parent_ref(section="http"), parent_ref(section="nope")],
            generation=5,
        ),
    )
    assert route_condition(dag, "r", "Accepted", parent=0) == ACCEPTED
    assert route_condition(dag, "r", "Accepted", parent=1) == ("False", "NoMatchingParent")
    assert listener_status(dag, "gw", "http")["attachedRoutes"] == 1
    assert listener_status(dag, "gw", "admin")["attachedRoutes"] == 0


def test_attached_routes_count_each_route_once_per_listener() -> None:
    http = parent_ref(section="http")
    port_80 = parent_ref(port=80)
    nope = parent_ref(section="nope")
    dag = build_text(
        *SERVICES,
        gateway(listeners=[HTTP, ADMIN]),
        http_route("both", "web", 80, generation=5),
        http_route("http-only", "web", 80, parents=[http], generation=5),
        http_route("twice", "web", 80, parents=[http, port_80], generation=5),
        http_route("refused", "web", 80, parents=[nope], generation=5),
    )
    assert listener_status(dag, "gw", "http")["attachedRoutes"] == 3
    assert listener_status(dag, "gw", "admin")["attachedRoutes"] == 1


def test_grpc_routes_get_status_too() -> None:
    dag = build_text(*SERVICES, GW_DEFAULT, grpc_route("g", "web", 80, generation=2))
    [entry] = parents(dag, "g", kind="GRPCRoute")
    assert [(c["type"], c["status"]) for c in entry["conditions"]] == [
        ("Accepted", "True"),
        ("ResolvedRefs", "True"),
    ]
    assert listener_status(dag, "gw", "http")["attachedRoutes"] == 1


def test_partially_invalid_rules_are_reported() -> None:
    unknown = {
        "type": "ExtensionRef",
        "extensionRef": {"group": "example.com", "kind": "X", "name": "x"},
    }
    partly = http_route("r", rules=[rule(WEB, filters=[unknown])], generation=5)
    dag = build_text(*SERVICES, GW_DEFAULT, partly)
    status, _ = route_condition(dag, "r", "PartiallyInvalid")
    assert status == "True"


def test_route_condition_extension_point() -> None:
    dag = build_text(*SERVICES, GW_DEFAULT, http_route("r", "web", 80, generation=5))
    key = ObjectKey("HTTPRoute", "default", "r")
    dns = condition("DNSResolved", True, "Resolved", "every name resolved", 5)
    extended = add_route_condition(dag.statuses[key], dns)
    [entry] = extended.status["parents"]
    assert [c["type"] for c in entry["conditions"]] == ["Accepted", "ResolvedRefs", "DNSResolved"]
    again = add_route_condition(extended, condition("DNSResolved", False, "Failed", "x", 5))
    assert [c["status"] for c in again.status["parents"][0]["conditions"]] == [
        "True",
        "True",
        "False",
    ]
    # The computed status is a value: extending it leaves the DAG's own untouched.
    assert len(dag.statuses[key].status["parents"][0]["conditions"]) == 2


# --- ExternalName aliases across namespaces -------------------------------------------------

ALIAS = external_service("alias", "web.team.svc.cluster.local", 80)


@pytest.mark.parametrize(
    ("grants", "resolved"),
    [
        pytest.param([], ("False", "RefNotPermitted"), id="no grant"),
        pytest.param(
            [
                reference_grant(
                    "alias", "team", from_kind="Service", from_namespace="default", to_name="web"
                )
            ],
            RESOLVED,
            id="granted",
        ),
        pytest.param(
            [
                reference_grant(
                    "alias",
                    "team",
                    from_kind="HTTPRoute",
                    from_group="",
                    from_namespace="default",
                    to_name="web",
                )
            ],
            ("False", "RefNotPermitted"),
            id="kind",
        ),
        pytest.param(
            [
                reference_grant(
                    "alias", "team", from_kind="Service", from_namespace="default", to_name="api"
                )
            ],
            ("False", "RefNotPermitted"),
            id="name",
        ),
    ],
)
def test_external_name_alias_into_another_namespace_needs_a_grant(
    grants: list[Object], resolved: tuple[str, str]
) -> None:
    dag = build_text(
        *SERVICES, ALIAS, *grants, GW_DEFAULT, http_route("r", "alias", 80, generation=5)
    )
    assert route_condition(dag, "r", "ResolvedRefs") == resolved
    if resolved == RESOLVED:
        # Served as the aliased Service's own EDS cluster.
        assert list(dag.clusters) == ["team/web/80"]
    else:
        assert dag.clusters == {}


def test_cross_namespace_backend_is_served_only_with_its_grant() -> None:
    world = [*SERVICES, GW_DEFAULT, http_route("r", rules=[rule(TEAM_WEB)], generation=5)]
    refused = build_text(*world)
    [vhost] = refused.groups[ALL_GATEWAYS].route_tables[0].virtual_hosts
    assert not isinstance(vhost.routes[0].action, Forward)  # answers 500
    granted = build_text(*world, GRANT)
    [vhost] = granted.groups[ALL_GATEWAYS].route_tables[0].virtual_hosts
    action = vhost.routes[0].action
    assert isinstance(action, Forward)
    assert [b.cluster for b in action.backends] == ["team/web/80"]


def test_routes_share_their_parent_ref_echo_and_resolved_condition() -> None:
    """Statuses are values: routes of one generation naming one parent share the dicts of
    its echo and of ResolvedRefs (two dicts, not two per route at 10,000 routes), and
    stamping a status for a write copies them rather than changing the shared ones."""
    dag = build_text(
        *SERVICES,
        GW_DEFAULT,
        http_route("a", "web", 80, generation=3),
        http_route("b", "web", 80, generation=3),
    )
    [a], [b] = parents(dag, "a"), parents(dag, "b")
    assert a["parentRef"] is b["parentRef"]
    resolved_a = next(c for c in a["conditions"] if c["type"] == "ResolvedRefs")
    resolved_b = next(c for c in b["conditions"] if c["type"] == "ResolvedRefs")
    assert resolved_a is resolved_b and resolved_a["status"] == "True"
    status = dag.statuses[ObjectKey("HTTPRoute", "default", "a")].status
    stamped = stamp(status, "2026-01-01T00:00:00Z")
    assert "lastTransitionTime" in stamped["parents"][0]["conditions"][0]
    assert all("lastTransitionTime" not in c for c in (resolved_a, *a["conditions"]))


def accepted_message(dag: Dag, route: str) -> str:
    [entry] = parents(dag, route)
    [accepted] = [c for c in entry["conditions"] if c["type"] == "Accepted"]
    assert accepted["status"] == "True"
    return str(accepted["message"])


def test_accepted_message_names_the_listeners_and_domains() -> None:
    """One listener, several (names and domains sorted, each once), and a listener that
    cannot be served (HTTPS without a certificate) all say where the route attached."""
    wildcard = listener("http", 80, hostname="*.example.com")
    https = listener(
        "https",
        443,
        "HTTPS",
        tls={"mode": "Terminate", "certificateRefs": [{"name": "missing"}]},
    )
    hostnames = ["b.example.com", "a.example.com", "b.example.com"]
    dag = build_text(
        *SERVICES,
        gateway(listeners=[wildcard, ADMIN, https]),
        http_route("one", "web", 80, parents=[parent_ref(section="admin")], hostnames=hostnames),
        http_route("two", "web", 80, parents=[parent_ref(port=80), parent_ref(port=8080)]),
        http_route("all", "web", 80, hostnames=hostnames),
    )
    assert accepted_message(dag, "one") == (
        "accepted by listener(s) 'admin' of Gateway default/gw for a.example.com, b.example.com"
    )
    assert accepted_message(dag, "all") == (
        "accepted by listener(s) 'admin', 'http', 'https' of Gateway default/gw for "
        "a.example.com, b.example.com; listener(s) 'https' cannot be served yet (see the Gateway)"
    )
    first, second = parents(dag, "two")
    assert [c["message"] for c in first["conditions"] if c["type"] == "Accepted"] == [
        "accepted by listener(s) 'http' of Gateway default/gw for *.example.com"
    ]
    assert [c["message"] for c in second["conditions"] if c["type"] == "Accepted"] == [
        "accepted by listener(s) 'admin' of Gateway default/gw for *"
    ]
