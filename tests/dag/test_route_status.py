"""Route status (HTTPRoute, GRPCRoute): Accepted and ResolvedRefs per parentRef, allowedRoutes
(namespaces Same/All/Selector, kinds), ReferenceGrants for backendRefs and ExternalName
aliases, and the status interface other code extends."""

from __future__ import annotations

import pytest

from dragoman.dag.conditions import condition
from dragoman.dag.model import ALL_GATEWAYS, Forward
from dragoman.dag.options import BuildOptions
from dragoman.dag.status.routes import add_route_condition
from dragoman.objects import ObjectKey
from tests.support.status_builds import (
    CONTROLLER,
    GW,
    build_text,
    listener,
    parents,
    route_condition,
)

SERVICES = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec: {selector: {app: dns}, ports: [{port: 53, protocol: UDP}]}
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: default}
spec: {type: ExternalName, externalName: localhost, ports: [{port: 80}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {access: gateway}}
---
"""


def gateway(*listeners: str, name: str = "gw") -> str:
    body = "\n".join(f"    - {item}" for item in listeners)
    return f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: {name}, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners:
{body}
---
"""


HTTP = "{name: http, port: 80, protocol: HTTP}"
ALL = "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}"
GW_DEFAULT = gateway(HTTP)


def route(
    backends: str = "[{name: web, port: 80}]",
    parent: str = "{name: gw}",
    namespace: str = "default",
    hostnames: str = "[]",
    kind: str = "HTTPRoute",
    name: str = "r",
    generation: int = 5,
) -> str:
    return f"""
apiVersion: {GW}
kind: {kind}
metadata: {{name: {name}, namespace: {namespace}, generation: {generation}}}
spec:
  parentRefs: [{parent}]
  hostnames: {hostnames}
  rules: [{{backendRefs: {backends}}}]
---
"""


def backend_grant(kind: str = "HTTPRoute", to_name: str | None = "web") -> str:
    name = f", name: {to_name}" if to_name else ""
    return f"""
apiVersion: {GW}
kind: ReferenceGrant
metadata: {{name: allow, namespace: team}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: {kind}, namespace: default}}]
  to: [{{group: "", kind: Service{name}}}]
---
"""


ACCEPTED = ("True", "Accepted")
RESOLVED = ("True", "ResolvedRefs")

# (id, manifests, Accepted, ResolvedRefs) of the route's only parent entry
ROUTES = [
    pytest.param(GW_DEFAULT + route(), ACCEPTED, RESOLVED, id="valid"),
    pytest.param(
        GW_DEFAULT + route(parent="{name: gw, sectionName: nope}"),
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="no listener of that sectionName",
    ),
    pytest.param(
        GW_DEFAULT + route(parent="{name: gw, port: 8080}"),
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="no listener on that port",
    ),
    pytest.param(
        GW_DEFAULT + route(parent="{name: gw, sectionName: http, port: 8080}"),
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="sectionName and port do not match",
    ),
    pytest.param(
        route(parent="{name: absent}"),
        ("False", "NoMatchingParent"),
        RESOLVED,
        id="missing Gateway (manifest mode)",
    ),
    pytest.param(
        GW_DEFAULT + route(parent="{name: gw, kind: Service, group: ''}"),
        ("False", "UnsupportedValue"),
        RESOLVED,
        id="parentRef kind",
    ),
    pytest.param(
        GW_DEFAULT + route(namespace="team", parent="{name: gw, namespace: default}"),
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="namespace Same refuses another namespace",
    ),
    pytest.param(
        gateway(ALL) + route(namespace="team", parent="{name: gw, namespace: default}"),
        ACCEPTED,
        RESOLVED,
        id="namespace All",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: "
            "{from: Selector, selector: {matchLabels: {access: gateway}}}}}"
        )
        + route(namespace="team", parent="{name: gw, namespace: default}"),
        ACCEPTED,
        RESOLVED,
        id="selector matchLabels",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: "
            "{from: Selector, selector: {matchLabels: {access: gateway}}}}}"
        )
        + route(),
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="selector refuses an unlabelled namespace",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: "
            "{from: Selector, selector: {matchExpressions: "
            "[{key: access, operator: In, values: [gateway, mesh]}]}}}}"
        )
        + route(namespace="team", parent="{name: gw, namespace: default}"),
        ACCEPTED,
        RESOLVED,
        id="selector matchExpressions In",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: "
            "{from: Selector, selector: {matchExpressions: [{key: access, operator: Exists}]}}}}"
        )
        + route(),
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="selector matchExpressions Exists",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: "
            "{from: Selector, selector: {matchLabels: "
            "{kubernetes.io/metadata.name: default}}}}}"
        )
        + route(),
        ACCEPTED,
        RESOLVED,
        id="selector on the name label of a namespace with no Namespace object",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: GRPCRoute}]}}"
        )
        + route(),
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="listener admits only another kind",
    ),
    pytest.param(
        gateway("{name: tcp, port: 9000, protocol: example.com/sctp}") + route(),
        ("False", "NotAllowedByListeners"),
        RESOLVED,
        id="listener of an unsupported protocol",
    ),
    pytest.param(
        gateway("{name: http, port: 80, protocol: HTTP, hostname: a.example.com}")
        + route(hostnames="[b.example.com]"),
        ("False", "NoMatchingListenerHostname"),
        RESOLVED,
        id="hostnames do not intersect",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: absent, port: 80}]"),
        ACCEPTED,
        ("False", "BackendNotFound"),
        id="missing Service",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: web, port: 81}]"),
        ACCEPTED,
        ("False", "BackendNotFound"),
        id="port the Service does not declare",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: web, kind: ConfigMap, port: 80}]"),
        ACCEPTED,
        ("False", "InvalidKind"),
        id="backendRef kind",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: dns, port: 53}]"),
        ACCEPTED,
        ("False", "UnsupportedProtocol"),
        id="UDP port",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: local, port: 80}]"),
        ACCEPTED,
        ("False", "UnsafeExternalName"),
        id="unsafe ExternalName",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: web, namespace: team, port: 80}]"),
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="cross-namespace backend without a grant",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: web, namespace: team, port: 80}]") + backend_grant(),
        ACCEPTED,
        RESOLVED,
        id="cross-namespace backend granted by name",
    ),
    pytest.param(
        GW_DEFAULT
        + route("[{name: web, namespace: team, port: 80}]")
        + backend_grant(to_name=None),
        ACCEPTED,
        RESOLVED,
        id="cross-namespace backend, every Service granted",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: web, namespace: team, port: 80}]") + backend_grant("Gateway"),
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="grant from another kind",
    ),
    pytest.param(
        GW_DEFAULT
        + route("[{name: web, namespace: team, port: 80}]")
        + backend_grant(to_name="other"),
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="grant to another name",
    ),
    pytest.param(
        GW_DEFAULT + route("[{name: web, port: 80}, {name: web, namespace: team, port: 80}]"),
        ACCEPTED,
        ("False", "RefNotPermitted"),
        id="one invalid backend of two",
    ),
]


@pytest.mark.parametrize(("manifests", "accepted", "resolved"), ROUTES)
def test_route_conditions(
    manifests: str, accepted: tuple[str, str], resolved: tuple[str, str]
) -> None:
    dag = build_text(SERVICES, manifests)
    [namespace] = [key.namespace for key in dag.statuses if key.kind == "HTTPRoute"]
    [entry] = parents(dag, "r", namespace)
    assert entry["controllerName"] == CONTROLLER
    assert route_condition(dag, "r", "Accepted", namespace) == accepted
    assert route_condition(dag, "r", "ResolvedRefs", namespace) == resolved
    assert all(c["observedGeneration"] == 5 for c in entry["conditions"])


def test_messages_name_the_field_and_what_to_do() -> None:
    dag = build_text(SERVICES, GW_DEFAULT + route("[{name: web, namespace: team, port: 80}]"))
    [entry] = parents(dag, "r")
    [resolved] = [c for c in entry["conditions"] if c["type"] == "ResolvedRefs"]
    assert resolved["message"].startswith("spec.rules[0].backendRefs[0].namespace: ")
    assert "ReferenceGrant in namespace 'team'" in resolved["message"]


def test_parent_ref_is_echoed_with_defaults() -> None:
    dag = build_text(
        SERVICES,
        GW_DEFAULT + route(parent="{name: gw, namespace: default, sectionName: http, port: 80}"),
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
    bare = build_text(SERVICES, GW_DEFAULT + route())
    assert parents(bare, "r")[0]["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "gw",
    }


def test_parents_of_other_controllers_get_no_entry() -> None:
    theirs = f"""
apiVersion: {GW}
kind: GatewayClass
metadata: {{name: theirs}}
spec: {{controllerName: example.com/another}}
---
""" + gateway(HTTP, name="their-gw").replace("dragoman", "theirs")
    dag = build_text(SERVICES, theirs, GW_DEFAULT, route(parent="{name: gw}, {name: their-gw}"))
    assert [entry["parentRef"]["name"] for entry in parents(dag, "r")] == ["gw"]


def test_missing_gateway_gets_no_entry_when_classes_are_required() -> None:
    dag = build_text(
        SERVICES, route(parent="{name: absent}"), options=BuildOptions(require_gateway_class=True)
    )
    assert parents(dag, "r") == []
    assert [p.reason for p in dag.problems] == ["NoMatchingParent"]  # still logged


def test_one_entry_per_parent_ref() -> None:
    dag = build_text(
        SERVICES,
        gateway(HTTP, "{name: admin, port: 8080, protocol: HTTP}"),
        route(parent="{name: gw, sectionName: http}, {name: gw, sectionName: nope}"),
    )
    assert route_condition(dag, "r", "Accepted", parent=0) == ACCEPTED
    assert route_condition(dag, "r", "Accepted", parent=1) == ("False", "NoMatchingParent")
    assert listener(dag, "gw", "http")["attachedRoutes"] == 1
    assert listener(dag, "gw", "admin")["attachedRoutes"] == 0


def test_attached_routes_count_each_route_once_per_listener() -> None:
    dag = build_text(
        SERVICES,
        gateway(HTTP, "{name: admin, port: 8080, protocol: HTTP}"),
        route(name="both"),
        route(name="http-only", parent="{name: gw, sectionName: http}"),
        route(name="twice", parent="{name: gw, sectionName: http}, {name: gw, port: 80}"),
        route(name="refused", parent="{name: gw, sectionName: nope}"),
    )
    assert listener(dag, "gw", "http")["attachedRoutes"] == 3
    assert listener(dag, "gw", "admin")["attachedRoutes"] == 1


def test_grpc_routes_get_status_too() -> None:
    grpc = f"""
apiVersion: {GW}
kind: GRPCRoute
metadata: {{name: g, namespace: default, generation: 2}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
"""
    dag = build_text(SERVICES, GW_DEFAULT, grpc)
    [entry] = parents(dag, "g", kind="GRPCRoute")
    assert [(c["type"], c["status"]) for c in entry["conditions"]] == [
        ("Accepted", "True"),
        ("ResolvedRefs", "True"),
    ]
    assert listener(dag, "gw", "http")["attachedRoutes"] == 1


def test_partially_invalid_rules_are_reported() -> None:
    text = GW_DEFAULT + route().replace(
        "rules: [{backendRefs: [{name: web, port: 80}]}]",
        "rules: [{backendRefs: [{name: web, port: 80}], filters: "
        "[{type: ExtensionRef, extensionRef: {group: example.com, kind: X, name: x}}]}]",
    )
    dag = build_text(SERVICES, text)
    status, _ = route_condition(dag, "r", "PartiallyInvalid")
    assert status == "True"


def test_route_condition_extension_point() -> None:
    dag = build_text(SERVICES, GW_DEFAULT + route())
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

ALIAS = """
apiVersion: v1
kind: Service
metadata: {name: alias, namespace: default}
spec: {type: ExternalName, externalName: web.team.svc.cluster.local, ports: [{port: 80}]}
---
"""


def alias_grant(from_kind: str = "Service", to_name: str = "web") -> str:
    return f"""
apiVersion: {GW}
kind: ReferenceGrant
metadata: {{name: alias, namespace: team}}
spec:
  from: [{{group: "", kind: {from_kind}, namespace: default}}]
  to: [{{group: "", kind: Service, name: {to_name}}}]
---
"""


@pytest.mark.parametrize(
    ("grant", "resolved"),
    [
        pytest.param("", ("False", "RefNotPermitted"), id="no grant"),
        pytest.param(alias_grant(), RESOLVED, id="granted"),
        pytest.param(alias_grant(from_kind="HTTPRoute"), ("False", "RefNotPermitted"), id="kind"),
        pytest.param(alias_grant(to_name="api"), ("False", "RefNotPermitted"), id="name"),
    ],
)
def test_external_name_alias_into_another_namespace_needs_a_grant(
    grant: str, resolved: tuple[str, str]
) -> None:
    dag = build_text(SERVICES, ALIAS, grant, GW_DEFAULT + route("[{name: alias, port: 80}]"))
    assert route_condition(dag, "r", "ResolvedRefs") == resolved
    if resolved == RESOLVED:
        # Served as the aliased Service's own EDS cluster.
        assert list(dag.clusters) == ["team/web/80"]
    else:
        assert dag.clusters == {}


def test_cross_namespace_backend_is_served_only_with_its_grant() -> None:
    text = SERVICES + GW_DEFAULT + route("[{name: web, namespace: team, port: 80}]")
    refused = build_text(text)
    [vhost] = refused.groups[ALL_GATEWAYS].route_tables[0].virtual_hosts
    assert not isinstance(vhost.routes[0].action, Forward)  # answers 500
    granted = build_text(text, backend_grant())
    [vhost] = granted.groups[ALL_GATEWAYS].route_tables[0].virtual_hosts
    action = vhost.routes[0].action
    assert isinstance(action, Forward)
    assert [b.cluster for b in action.backends] == ["team/web/80"]
