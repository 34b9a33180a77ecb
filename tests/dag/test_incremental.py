"""Incremental builds equal full builds: random (seeded) sequences of changes of every kind,
the incremental Dag and its serialized resources compared with a fresh full build of the same
store after each step."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation, DnsObservations
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.envoy.incremental import IncrementalTranslation, spliced_route_table
from dragoman.envoy.routes import route_configuration, virtual_host
from dragoman.envoy.translate import translate
from dragoman.objects import KubeObject
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.store import Store
from tests.support.certificates import certificate_authority
from tests.support.feature_manifests import every_feature_dag
from tests.support.status_builds import objects

_CA = certificate_authority("incremental builds CA")
_CERTIFICATES = [_CA.issue("secure.example.com", "*.example.com") for _ in range(2)]
NAMESPACES = ("default", "apps")
HOSTNAMES = (
    "a.example.com",
    "b.example.com",
    "*.example.com",
    "x.a.example.com",
    "secure.example.com",
    "other.test",
    "*.test",
)
PATHS = ("/", "/api", "/api/v2", "/static")

Key = tuple[str, str, str]


def _gateway(rng: random.Random, name: str = "edge") -> str:
    listeners = ["{name: http, protocol: HTTP, port: 8080}"]
    if rng.random() < 0.7:
        listeners.append('{name: wild, protocol: HTTP, port: 8080, hostname: "*.example.com"}')
    if rng.random() < 0.7:
        listeners.append(
            "{name: https, protocol: HTTPS, port: 8443, hostname: secure.example.com, "
            "tls: {certificateRefs: [{name: site}]}}"
        )
        listeners.append(
            "{name: https-any, protocol: HTTPS, port: 8443, "
            "tls: {certificateRefs: [{name: site, namespace: apps}]}}"
        )
    if rng.random() < 0.7:
        listeners.append(
            "{name: grpc, protocol: HTTP, port: 8081, allowedRoutes: {kinds: [{kind: GRPCRoute}]}}"
        )
    if rng.random() < 0.7:
        listeners.append("{name: tcp, protocol: TCP, port: 9000}")
    if rng.random() < 0.7:
        listeners.append("{name: udp, protocol: UDP, port: 9000}")
    if rng.random() < 0.7:
        # Passthrough for the example.com names, terminated for one of them: on one port.
        listeners.append(
            '{name: tls-pass, protocol: TLS, port: 9443, hostname: "*.example.com", '
            "tls: {mode: Passthrough}}"
        )
        listeners.append(
            "{name: tls-end, protocol: TLS, port: 9443, hostname: secure.example.com, "
            "tls: {mode: Terminate, certificateRefs: [{name: site}]}}"
        )
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{", ".join(listeners)}]
"""


def _service(rng: random.Random, namespace: str, name: str) -> str:
    port = rng.choice((80, 8080))
    shape = rng.random()
    if shape < 0.4:
        ports = f"[{{name: http, port: {port}, targetPort: 8080}}]"
        spec = f"{{selector: {{app: {name}}}, ports: {ports}}}"
    elif shape < 0.7:
        spec = (
            f"{{type: ExternalName, externalName: {name}.example.net, ports: [{{port: {port}}}]}}"
        )
    elif shape < 0.85:
        target = rng.choice(("svc-0", "svc-1"))
        spec = (
            f"{{type: ExternalName, externalName: {target}.{rng.choice(NAMESPACES)}"
            f".svc.cluster.local, ports: [{{port: {port}}}]}}"
        )
    else:
        spec = f"{{type: ExternalName, externalName: 127.0.0.1, ports: [{{port: {port}}}]}}"
    # A load balancer in front: its address may be a Gateway's (see the address options).
    status = ""
    if rng.random() < 0.3:
        status = f"status: {{loadBalancer: {{ingress: [{{ip: 203.0.113.{rng.randrange(9)}}}]}}}}"
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec: {spec}
{status}
"""


def _slice(rng: random.Random, namespace: str, name: str) -> str:
    service = f"svc-{rng.randrange(6)}"
    endpoints = ", ".join(
        # Now and then an address the build drops (link-local): a problem on the slice.
        f"{{addresses: [{_endpoint_address(rng)}], "
        f"conditions: {{ready: {rng.choice(('true', 'true', 'false'))}}}}}"
        for _ in range(rng.randrange(0, 4))
    )
    return f"""
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{kubernetes.io/service-name: {service}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints: [{endpoints}]
"""


def _endpoint_address(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return f"169.254.0.{rng.randrange(1, 9)}"
    return f"10.0.{rng.randrange(4)}.{rng.randrange(1, 200)}"


def _backend_refs(rng: random.Random) -> str:
    refs = []
    for _ in range(rng.randrange(1, 3)):
        namespace = rng.choice(NAMESPACES)
        refs.append(
            f"{{name: svc-{rng.randrange(6)}, namespace: {namespace}, "
            f"port: {rng.choice((80, 8080))}, weight: {rng.randrange(0, 3)}}}"
        )
    return ", ".join(refs)


def _hostnames(rng: random.Random) -> str:
    return ", ".join(f'"{h}"' for h in rng.sample(HOSTNAMES, rng.randrange(0, 3)))


def _http_route(rng: random.Random, namespace: str, name: str) -> str:
    parents = rng.choice(
        (
            "[{name: edge, namespace: default}]",
            "[{name: edge, namespace: default, sectionName: wild}]",
            "[{name: edge, namespace: default, sectionName: https}]",
            "[{name: edge, namespace: default}, {name: second, namespace: default}]",
            "[{name: missing, namespace: default}]",
        )
    )
    rules = []
    for _ in range(rng.randrange(1, 3)):
        path = rng.choice(PATHS)
        match_type = rng.choice(("PathPrefix", "Exact"))
        rules.append(
            f"{{matches: [{{path: {{type: {match_type}, value: {path}}}}}], "
            f"backendRefs: [{_backend_refs(rng)}]}}"
        )
    created = f"2024-01-0{rng.randrange(1, 4)}T00:00:00Z"
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {namespace}, creationTimestamp: "{created}"}}
spec:
  parentRefs: {parents}
  hostnames: [{_hostnames(rng)}]
  rules: [{", ".join(rules)}]
"""


def _grpc_route(rng: random.Random, namespace: str, name: str) -> str:
    # On the HTTP listener it may conflict with HTTPRoutes: a full build, kept rare.
    section = "http" if rng.random() < 0.15 else "grpc"
    created = f"2024-01-0{rng.randrange(1, 4)}T00:00:00Z"
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: {name}, namespace: {namespace}, creationTimestamp: "{created}"}}
spec:
  parentRefs: [{{name: edge, namespace: default, sectionName: {section}}}]
  hostnames: [{_hostnames(rng)}]
  rules: [{{matches: [{{method: {{service: pkg.Svc{rng.randrange(3)}}}}}],
           backendRefs: [{_backend_refs(rng)}]}}]
"""


def _reference_grant(rng: random.Random, namespace: str, name: str) -> str:
    target = rng.choice(('{group: "", kind: Service}', '{group: "", kind: Secret}'))
    source = rng.choice(("HTTPRoute", "Gateway", "GRPCRoute"))
    other = "default" if namespace == "apps" else "apps"
    return f"""
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: {source}, namespace: {other}}}]
  to: [{target}]
"""


def _secret(rng: random.Random, namespace: str, name: str) -> str:
    return rng.choice(_CERTIFICATES).secret_yaml(name, namespace)


def _backend_tls_policy(rng: random.Random, namespace: str, name: str) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  targetRefs: [{{group: "", kind: Service, name: svc-{rng.randrange(6)}}}]
  validation: {{hostname: svc.example.net, wellKnownCACertificates: System}}
"""


def _l4_route(kind: str, sections: tuple[str, ...]) -> Maker:
    """TCPRoutes, TLSRoutes and UDPRoutes: several compete for one listener (l4_conflicts)."""

    def make(rng: random.Random, namespace: str, name: str) -> str:
        section = rng.choice(sections)
        hostnames = ""
        if kind == "TLSRoute":
            chosen = rng.sample(("a.example.com", "secure.example.com", "*.example.com"), 2)
            hostnames = f"hostnames: [{', '.join(repr(h) for h in chosen)}]"
        created = f"2024-01-0{rng.randrange(1, 4)}T00:00:00Z"
        return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: {kind}
metadata: {{name: {name}, namespace: {namespace}, creationTimestamp: "{created}"}}
spec:
  parentRefs: [{{name: edge, namespace: default, sectionName: {section}}}]
  {hostnames}
  rules: [{{backendRefs: [{_backend_refs(rng)}]}}]
"""

    return make


Maker = Callable[[random.Random, str, str], str]
# kind -> (how to make one, names it may have, namespaces, weight among changes, how often a
# change to an existing one deletes it)
KINDS: dict[str, tuple[Maker, tuple[str, ...], tuple[str, ...], int, float]] = {
    "Service": (_service, tuple(f"svc-{i}" for i in range(6)), NAMESPACES, 6, 0.25),
    "EndpointSlice": (_slice, tuple(f"slice-{i}" for i in range(6)), NAMESPACES, 4, 0.25),
    "HTTPRoute": (_http_route, tuple(f"route-{i}" for i in range(8)), NAMESPACES, 8, 0.25),
    "GRPCRoute": (_grpc_route, ("grpc-0", "grpc-1"), NAMESPACES, 2, 0.4),
    "Gateway": (
        lambda rng, ns, name: _gateway(rng, name),
        ("edge", "second"),
        ("default",),
        1,
        0.25,
    ),
    "Secret": (_secret, ("site",), NAMESPACES, 1, 0.25),
    "ReferenceGrant": (_reference_grant, ("grant-0", "grant-1"), NAMESPACES, 2, 0.25),
    "BackendTLSPolicy": (_backend_tls_policy, ("policy",), ("default",), 1, 0.5),
    "TCPRoute": (_l4_route("TCPRoute", ("tcp",)), ("tcp-0", "tcp-1"), NAMESPACES, 2, 0.25),
    "TLSRoute": (
        _l4_route("TLSRoute", ("tls-pass", "tls-end")),
        ("tls-0", "tls-1", "tls-2"),
        NAMESPACES,
        2,
        0.25,
    ),
    "UDPRoute": (_l4_route("UDPRoute", ("udp", "tcp")), ("udp-0", "udp-1"), NAMESPACES, 2, 0.25),
}
# Of the changes that would make an object that does not exist, the share that do.
CREATING: dict[str, float] = {}
GATEWAY_CLASS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: dragoman}
spec: {controllerName: dragoman.dev/gateway-controller}
"""


def _one(text: str) -> KubeObject:
    (made,) = objects(text)
    return made


def _change(
    rng: random.Random, held: dict[Key, KubeObject], kind: str | None = None
) -> tuple[type, Key]:
    """Add, replace or delete one object of a random kind; its type and key."""
    if kind is None:
        kind = rng.choices(list(KINDS), weights=[k[3] for k in KINDS.values()])[0]
    make, names, namespaces, _, deleting = KINDS[kind]
    key = (kind, rng.choice(namespaces), rng.choice(names))
    if key not in held and rng.random() >= CREATING.get(kind, 1.0):
        return _change(rng, held)  # another change instead
    if key in held and rng.random() < deleting:
        return type(held.pop(key)), key
    held[key] = _one(make(rng, key[1], key[2]))
    return type(held[key]), key


def _initial(rng: random.Random) -> dict[Key, KubeObject]:
    held: dict[Key, KubeObject] = {("GatewayClass", "", "dragoman"): _one(GATEWAY_CLASS)}
    held[("Gateway", "default", "edge")] = _one(_gateway(rng))
    for kind in ("Service", "EndpointSlice", "HTTPRoute", "Service", "HTTPRoute", "Secret"):
        for _ in range(4):
            _change(rng, held, kind)
    return held


def _bodies(snapshots: dict[str, Snapshot]) -> dict[str, dict[str, tuple[str, dict[str, bytes]]]]:
    return {
        group: {
            type_url: (typed.version, {name: r.body for name, r in typed.resources.items()})
            for type_url, typed in snapshot.types.items()
        }
        for group, snapshot in snapshots.items()
    }


def _assert_same(incremental: Dag, full: Dag) -> None:
    assert incremental.problems == full.problems
    assert list(incremental.statuses.items()) == list(full.statuses.items())
    assert dict(incremental.groups) == dict(full.groups)
    assert list(incremental.groups) == list(full.groups)
    assert dict(incremental.clusters) == dict(full.clusters)
    assert dict(incremental.load_assignments) == dict(full.load_assignments)
    assert incremental.dns_hostnames == full.dns_hostnames
    assert incremental == full


def _observations(rng: random.Random) -> DnsObservations:
    """What a DNS check might have seen of the external names the Services use."""
    seen: dict[str, DnsObservation] = {}
    for i in range(6):
        roll = rng.random()
        if roll < 0.5:
            seen[f"svc-{i}.example.net"] = DnsObservation((f"192.0.2.{i + 1}",))
        elif roll < 0.7:
            seen[f"svc-{i}.example.net"] = DnsObservation(error="NXDOMAIN")
    return seen


# Gateway addresses named by the operator and the load balancer of a Service.
ADDRESSES = BuildOptions(
    gateway_addresses=("gw.example.com",), address_service=("default", "svc-0")
)


@pytest.mark.parametrize(
    ("seed", "options"),
    [
        *((seed, BuildOptions()) for seed in range(12)),
        (100, BuildOptions(dns_check=True)),
        (101, BuildOptions(dns_check=True)),
        (102, BuildOptions(dns_check=True)),
        (103, BuildOptions(dns_check=True)),
        (200, ADDRESSES),
        (201, ADDRESSES),
    ],
)
def test_random_changes_match_a_full_build(seed: int, options: BuildOptions) -> None:
    rng = random.Random(seed)
    dns_check = options.dns_check
    held = _initial(rng)
    dns = _observations(rng) if dns_check else None
    builder = IncrementalBuild(options)
    translation = IncrementalTranslation()
    kinds: dict[str, int] = {}
    store = Store.from_objects(held.values())
    for step in range(60):
        result = builder.build(store, dns)
        kinds[result.kind] = kinds.get(result.kind, 0) + 1
        full = build(store, options, dns)
        try:
            _assert_same(result.dag, full)
            assert _bodies(translation.translate(result.dag)) == _bodies(translate(full))
        except AssertionError as error:
            raise AssertionError(f"seed {seed}, step {step} ({result.kind})") from error
        if dns_check and rng.random() < 0.15:
            dns = _observations(rng)  # new observations: the routes forwarding to them
            continue
        kind, key = _change(rng, held)
        if rng.random() < 0.5:
            store = Store.from_objects(held.values())  # as a manifest directory makes it
        else:  # as the Kubernetes cache makes it, changes found from the store's own record
            store = store.with_object(kind, key[1:], held.get(key))
            if rng.random() < 0.3:
                kind, key = _change(rng, held)  # two changes between builds
                store = store.with_object(kind, key[1:], held.get(key))
    # The comparison is only worth something if most steps took the incremental path.
    assert kinds.get("incremental", 0) >= 20, kinds
    assert kinds.get("full", 0) >= 1, kinds


def test_unchanged_parts_keep_their_objects_and_bytes() -> None:
    """A change to one route re-serializes its virtual host's table and nothing else: every
    other resource is the same object (bytes and hash), every other TypeSnapshot too."""
    rng = random.Random(7)
    held = {k: v for k, v in _initial(rng).items() if k[0] != "GRPCRoute"}

    def route(path: str) -> KubeObject:
        return _one(f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: mine, namespace: default}}
spec:
  parentRefs: [{{name: edge, namespace: default, sectionName: http}}]
  hostnames: [mine.example.org]
  rules: [{{matches: [{{path: {{type: PathPrefix, value: {path}}}}}],
           backendRefs: [{{name: mine, port: 80}}, {{name: kept, port: 80}}]}}]
""")

    def service(host: str) -> KubeObject:
        return _one(f"""
apiVersion: v1
kind: Service
metadata: {{name: mine, namespace: default}}
spec: {{type: ExternalName, externalName: {host}, ports: [{{port: 80}}]}}
""")

    held[("HTTPRoute", "default", "mine")] = route("/one")
    held[("Service", "default", "mine")] = service("mine.example.net")
    held[("Service", "default", "kept")] = _one("""
apiVersion: v1
kind: Service
metadata: {name: kept, namespace: default}
spec: {type: ExternalName, externalName: kept.example.net, ports: [{port: 80}]}
""")
    builder, translation = IncrementalBuild(), IncrementalTranslation()
    before = translation.translate(builder.build(Store.from_objects(held.values())).dag)
    held[("HTTPRoute", "default", "mine")] = route("/two")
    result = builder.build(Store.from_objects(held.values()))
    after = translation.translate(result.dag)
    assert result.kind == "incremental"
    for group, snapshot in after.items():
        for type_url in (CLUSTER, ENDPOINT, LISTENER):
            old, new = before[group].of_type(type_url), snapshot.of_type(type_url)
            same = [
                name for name in new.resources if old.resources.get(name) is new.resources[name]
            ]
            reused = set(same) == set(new.resources) & set(old.resources)
            assert reused, (group, type_url)
    # Of the route tables, only those whose virtual hosts the route reaches changed.
    tables = [
        name
        for snapshot, old in ((after[g], before[g]) for g in after)
        for name, resource in snapshot.of_type(ROUTE).resources.items()
        if old.of_type(ROUTE).resources.get(name) is not resource
    ]
    assert tables
    assert len(tables) < sum(len(s.of_type(ROUTE).resources) for s in after.values())
    # Then a Service: its cluster is made again, every other one is still the first made.
    held[("Service", "default", "mine")] = service("moved.example.net")
    result = builder.build(Store.from_objects(held.values()))
    assert result.kind == "incremental"
    last = translation.translate(result.dag)
    prefix = "default/mine/"
    assert "default/kept/80" in last[""].of_type(CLUSTER).resources
    assert (
        last[""].of_type(CLUSTER).resources["default/mine/80"]
        is not (before[""].of_type(CLUSTER).resources["default/mine/80"])
    )
    for group, snapshot in last.items():
        old, new = before[group].of_type(CLUSTER), snapshot.of_type(CLUSTER)
        for name in new.resources.keys() & old.resources.keys():
            if not name.startswith(prefix):
                assert old.resources[name] is new.resources[name], name


@pytest.mark.parametrize("made", ["random", "every feature"])
def test_spliced_route_tables_are_the_bytes_protobuf_writes(made: str) -> None:
    dag = (
        build(Store.from_objects(_initial(random.Random(3)).values()))
        if made == "random"
        else every_feature_dag()
    )
    assert any(group.route_tables for group in dag.groups.values())
    for group in dag.groups.values():
        for table in group.route_tables:
            entries = []
            for host in table.virtual_hosts:
                body = virtual_host(host).SerializeToString(deterministic=True)
                entries.append(b"\x12" + _VarintBytes(len(body)) + body)
            whole = route_configuration(table).SerializeToString(deterministic=True)
            assert spliced_route_table(table, entries).body == whole
