"""Incremental builds equal full builds: random (seeded) sequences of changes of every kind,
the incremental Dag and its serialized resources compared with a fresh full build of the same
store after each step."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation, DnsObservations
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import Dag, changed_keys_since
from dragoman.dag.options import BuildOptions
from dragoman.envoy.resources.route_messages import route_configuration, virtual_host
from dragoman.envoy.translation.route_splicing import spliced_route_table
from dragoman.envoy.translation.translator import Translation, translate
from dragoman.objects import KubeObject
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.store import Store
from tests.support.builders import (
    Object,
    allowed_routes,
    backend_ref,
    backend_tls_policy,
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    grpc_match,
    grpc_route,
    http_route,
    listener,
    listener_tls,
    match,
    parent_ref,
    reference_grant,
    rule,
    service,
    tls_secret,
    typed,
    xbackend,
    xbackend_ref,
)
from tests.support.certificates import certificate_authority
from tests.support.feature_manifests import every_feature_dag

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


def _gateway(rng: random.Random, name: str = "edge") -> Object:
    listeners = [listener("http", 8080)]
    if rng.random() < 0.7:
        listeners.append(listener("wild", 8080, hostname="*.example.com"))
    if rng.random() < 0.7:
        site = listener_tls("site")
        listeners.append(listener("https", 8443, "HTTPS", hostname="secure.example.com", tls=site))
        other = listener_tls({"name": "site", "namespace": "apps"})
        listeners.append(listener("https-any", 8443, "HTTPS", tls=other))
    if rng.random() < 0.7:
        grpc_only = allowed_routes(kinds=["GRPCRoute"])
        listeners.append(listener("grpc", 8081, allowed_routes=grpc_only))
    if rng.random() < 0.7:
        listeners.append(listener("tcp", 9000, "TCP"))
    if rng.random() < 0.7:
        listeners.append(listener("udp", 9000, "UDP"))
    if rng.random() < 0.7:
        # Passthrough for the example.com names, terminated for one of them: on one port.
        passthrough = listener_tls(mode="Passthrough")
        listeners.append(
            listener("tls-pass", 9443, "TLS", hostname="*.example.com", tls=passthrough)
        )
        terminate = listener_tls("site", mode="Terminate")
        listeners.append(
            listener("tls-end", 9443, "TLS", hostname="secure.example.com", tls=terminate)
        )
    return gateway(name, listeners=listeners)


def _service(rng: random.Random, namespace: str, name: str) -> Object:
    port = rng.choice((80, 8080))
    shape = rng.random()
    if shape < 0.4:
        made = service(name, port, 8080, namespace=namespace)
    elif shape < 0.7:
        made = external_service(name, f"{name}.example.net", port, namespace=namespace)
    elif shape < 0.85:
        target = rng.choice(("svc-0", "svc-1"))
        host = f"{target}.{rng.choice(NAMESPACES)}.svc.cluster.local"
        made = external_service(name, host, port, namespace=namespace)
    else:
        made = external_service(name, "127.0.0.1", port, namespace=namespace)
    # A load balancer in front: its address may be a Gateway's (see the address options).
    if rng.random() < 0.3:
        ingress = [{"ip": f"203.0.113.{rng.randrange(9)}"}]
        made["status"] = {"loadBalancer": {"ingress": ingress}}
    return made


def _slice(rng: random.Random, namespace: str, name: str) -> Object:
    service_name = f"svc-{rng.randrange(6)}"
    endpoints = []
    for _ in range(rng.randrange(0, 4)):
        address = f"10.0.{rng.randrange(4)}.{rng.randrange(1, 200)}"
        if rng.random() < 0.1:
            # Now and then an address the build drops (link-local): a problem on the slice.
            address = f"169.254.0.{rng.randrange(1, 9)}"
        ready = rng.choice((True, True, False))
        endpoints.append({"addresses": [address], "conditions": {"ready": ready}})
    # Ready and not-ready endpoints in a random order: given in full.
    made = endpoint_slice(service_name, 8080, namespace=namespace, name=name)
    return {**made, "endpoints": endpoints}


def _backend_refs(rng: random.Random) -> list[Object]:
    refs = []
    for _ in range(rng.randrange(1, 3)):
        namespace = rng.choice(NAMESPACES)
        if rng.random() < 0.25:  # the route's own namespace's (that XBackend may not exist)
            refs.append(xbackend_ref(f"xb-{rng.randrange(2)}"))
            continue
        name = f"svc-{rng.randrange(6)}"
        port = rng.choice((80, 8080))
        refs.append(backend_ref(name, port, namespace=namespace, weight=rng.randrange(0, 3)))
    return refs


def _hostnames(rng: random.Random) -> list[str]:
    return rng.sample(HOSTNAMES, rng.randrange(0, 3))


def _edge(section: str | None = None) -> Object:
    return parent_ref("edge", namespace="default", section=section)


def _http_route(rng: random.Random, namespace: str, name: str) -> Object:
    parents = rng.choice(
        (
            [_edge()],
            [_edge("wild")],
            [_edge("https")],
            [_edge(), parent_ref("second", namespace="default")],
            [parent_ref("missing", namespace="default")],
        )
    )
    rules = []
    for _ in range(rng.randrange(1, 3)):
        path = rng.choice(PATHS)
        path_type = rng.choice(("PathPrefix", "Exact"))
        rules.append(rule(*_backend_refs(rng), matches=[match(path, path_type=path_type)]))
    created = f"2024-01-0{rng.randrange(1, 4)}T00:00:00Z"
    return http_route(
        name,
        namespace=namespace,
        created=created,
        parents=parents,
        hostnames=_hostnames(rng),
        rules=rules,
    )


def _grpc_route(rng: random.Random, namespace: str, name: str) -> Object:
    # On the HTTP listener it may conflict with HTTPRoutes: a full build, kept rare.
    section = "http" if rng.random() < 0.15 else "grpc"
    created = f"2024-01-0{rng.randrange(1, 4)}T00:00:00Z"
    hostnames = _hostnames(rng)
    method = grpc_match(f"pkg.Svc{rng.randrange(3)}")
    return grpc_route(
        name,
        namespace=namespace,
        created=created,
        parents=[_edge(section)],
        hostnames=hostnames,
        rules=[rule(*_backend_refs(rng), matches=[method])],
    )


def _reference_grant(rng: random.Random, namespace: str, name: str) -> Object:
    target = rng.choice(("Service", "Secret"))
    source = rng.choice(("HTTPRoute", "Gateway", "GRPCRoute"))
    other = "default" if namespace == "apps" else "apps"
    return reference_grant(
        name, namespace, from_kind=source, from_namespace=other, to_kind=target, version="v1beta1"
    )


def _secret(rng: random.Random, namespace: str, name: str) -> Object:
    pem = rng.choice(_CERTIFICATES)
    return tls_secret(name, pem.certificate, pem.private_key, namespace=namespace)


def _backend_tls_policy(rng: random.Random, namespace: str, name: str) -> Object:
    target = f"svc-{rng.randrange(6)}"
    options = rng.choice(
        (
            None,
            {"dragoman.dev/client-certificate": "site"},
            {"dragoman.dev/min-tls-version": "TLSv1_3", "dragoman.dev/ecdh-curves": "X25519"},
            {"dragoman.dev/min-tls-version": "TLSv1.3"},
        )
    )
    return backend_tls_policy(
        name, target, "svc.example.net", namespace=namespace, well_known="System", options=options
    )


def _xbackend(rng: random.Random, namespace: str, name: str) -> Object:
    tls = rng.choice(
        (
            None,
            {"mode": "ServerOnly"},
            {"mode": "ClientAndServer", "clientCertificateRef": {"name": "site"}},
        )
    )
    hostname = rng.choice(("api.partner.example", "other.partner.example", "localhost"))
    return xbackend(name, hostname, rng.choice((443, 8443)), namespace=namespace, tls=tls)


def _l4_route(kind: str, sections: tuple[str, ...]) -> Maker:
    """TCPRoutes, TLSRoutes and UDPRoutes: several compete for one listener (l4_conflicts)."""

    def make(rng: random.Random, namespace: str, name: str) -> Object:
        hostnames: list[str] = []
        if kind == "TLSRoute":
            hostnames = rng.sample(("a.example.com", "secure.example.com", "*.example.com"), 2)
        return http_route(
            name,
            kind=kind,
            namespace=namespace,
            created=f"2024-01-0{rng.randrange(1, 4)}T00:00:00Z",
            parents=[_edge(rng.choice(sections))],
            hostnames=hostnames,
            rules=[rule(*_backend_refs(rng))],
        )

    return make


Maker = Callable[[random.Random, str, str], Object]
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
# The same world with XBackends coming and going (builds are full while one exists).
WITH_XBACKENDS = {**KINDS, "XBackend": (_xbackend, ("xb-0", "xb-1"), NAMESPACES, 2, 0.6)}
# Of the changes that would make an object that does not exist, the share that do.
CREATING: dict[str, float] = {}


def _one(document: Object) -> KubeObject:
    (made,) = typed(document)
    return made


def _change(
    rng: random.Random,
    held: dict[Key, KubeObject],
    kind: str | None = None,
    kinds: dict[str, tuple[Maker, tuple[str, ...], tuple[str, ...], int, float]] = KINDS,
) -> tuple[type, Key]:
    """Add, replace or delete one object of a random kind (of `kinds`); its type and key."""
    if kind is None:
        kind = rng.choices(list(kinds), weights=[k[3] for k in kinds.values()])[0]
    make, names, namespaces, _, deleting = kinds[kind]
    key = (kind, rng.choice(namespaces), rng.choice(names))
    if key not in held and rng.random() >= CREATING.get(kind, 1.0):
        return _change(rng, held, kinds=kinds)  # another change instead
    if key in held and rng.random() < deleting:
        return type(held.pop(key)), key
    held[key] = _one(make(rng, key[1], key[2]))
    return type(held[key]), key


def _initial(rng: random.Random) -> dict[Key, KubeObject]:
    held: dict[Key, KubeObject] = {("GatewayClass", "", "dragoman"): _one(gateway_class())}
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


def _assert_changed_clusters_named(before: Dag | None, after: Dag) -> None:
    """The clusters a Dag says changed since the one before (translation patches those
    alone) include every cluster that differs from that one's, came or went."""
    hint = after.changed_clusters
    if before is None or hint is None or after is before:
        return
    assert hint[0] == id(before.clusters)
    old, new = before.clusters, after.clusters
    differ = {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}
    assert differ <= hint[1], sorted(differ - hint[1])


def _assert_same(incremental: Dag, full: Dag) -> None:
    assert incremental.problems == full.problems
    assert list(incremental.statuses.items()) == list(full.statuses.items())
    assert dict(incremental.groups) == dict(full.groups)
    assert list(incremental.groups) == list(full.groups)
    assert dict(incremental.clusters) == dict(full.clusters)
    assert dict(incremental.load_assignments) == dict(full.load_assignments)
    assert incremental.dns_hostnames == full.dns_hostnames
    # The proxyless gRPC clients' Service targets, kept Service by Service, in the same order.
    targets, full_targets = incremental.service_targets, full.service_targets
    assert targets.targets == full_targets.targets
    assert dict(targets.clusters) == dict(full_targets.clusters)
    assert dict(targets.load_assignments) == dict(full_targets.load_assignments)
    assert incremental == full


def _observations(rng: random.Random) -> DnsObservations:
    """What a DNS check might have seen of the external names the Services use."""
    seen: dict[str, DnsObservation] = {}
    for i in range(6):
        roll = rng.random()
        # Served answers differ from one observation to the next (the builder's DNS fast
        # path: only addresses and DNSResolved change), or the name is refused.
        if roll < 0.3:
            seen[f"svc-{i}.example.net"] = DnsObservation((f"192.0.2.{i + 1}",))
        elif roll < 0.4:
            seen[f"svc-{i}.example.net"] = DnsObservation((f"192.0.2.{i + 1}", "192.0.2.200"))
        elif roll < 0.5:  # a refused answer after a good one: the kept addresses served
            seen[f"svc-{i}.example.net"] = DnsObservation(
                ("127.0.0.1",), kept=(f"192.0.2.{i + 1}",)
            )
        elif roll < 0.7:
            seen[f"svc-{i}.example.net"] = DnsObservation(error="NXDOMAIN")
    return seen


def _one_answer(rng: random.Random, dns: DnsObservations) -> DnsObservations:
    """`dns` with a new answer for one name (served if it was: the builder's DNS fast path)."""
    i = rng.randrange(6)
    answer = (f"192.0.2.{i + 1}", f"192.0.2.{rng.randrange(100, 110)}")
    return {**dns, f"svc-{i}.example.net": DnsObservation(answer)}


# Gateway addresses named by the operator and the load balancer of a Service.
ADDRESSES = BuildOptions(
    gateway_addresses=("gw.example.com",), address_service=("default", "svc-0")
)


def _built_alike(
    builder: IncrementalBuild,
    translation: Translation,
    store: Store,
    options: BuildOptions,
    dns: DnsObservations | None,
    where: str,
) -> tuple[str, Dag]:
    """The kind of the incremental build of `store`, and the full build it was found equal to
    (the Dags and their serialized resources)."""
    before = builder.dag
    result = builder.build(store, dns)
    full = build(store, options, dns)
    try:
        _assert_same(result.dag, full)
        _assert_changed_clusters_named(before, result.dag)
        assert _bodies(translation.translate(result.dag)) == _bodies(translate(full))
    except AssertionError as error:
        raise AssertionError(f"seed/step {where} ({result.kind})") from error
    return result.kind, full


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
    translation = Translation()
    kinds: dict[str, int] = {}
    store = Store.from_objects(held.values())
    targets_seen = 0
    for step in range(60):
        kind_built, full = _built_alike(builder, translation, store, options, dns, f"{seed}/{step}")
        kinds[kind_built] = kinds.get(kind_built, 0) + 1
        targets_seen += len(full.service_targets.targets)
        if dns_check and rng.random() < 0.15:
            # New observations: the routes forwarding to them; one name's answer alone, often.
            dns = _observations(rng) if rng.random() < 0.5 else _one_answer(rng, dns or {})
            continue
        store = _changed_store(rng, held, store)
    # The comparison is only worth something if most steps took the incremental path.
    assert kinds.get("incremental", 0) >= 20, kinds
    assert kinds.get("full", 0) >= 1, kinds
    assert targets_seen > 0


def _changed_store(
    rng: random.Random,
    held: dict[Key, KubeObject],
    store: Store,
    kinds: dict[str, tuple[Maker, tuple[str, ...], tuple[str, ...], int, float]] = KINDS,
) -> Store:
    """The store after one or two random changes to `held` (objects of `kinds`)."""
    kind, key = _change(rng, held, kinds=kinds)
    if rng.random() < 0.5:
        return Store.from_objects(held.values())  # as a manifest directory makes it
    # As the Kubernetes cache makes it, changes found from the store's own record.
    store = store.with_object(kind, key[1:], held.get(key))
    if rng.random() < 0.3:
        kind, key = _change(rng, held, kinds=kinds)  # two changes between builds
        store = store.with_object(kind, key[1:], held.get(key))
    return store


@pytest.mark.parametrize("seed", [300, 301, 302, 303])
def test_targets_asked_for_now_and_then_match_a_full_build(seed: int) -> None:
    """The proxyless Service targets wait until asked for, the changes of the builds in
    between merged: asked for after any number of builds (or an earlier build's, after
    later ones), they are a full build's."""
    rng = random.Random(seed)
    options = BuildOptions(dns_check=seed % 2 == 1)
    held = _initial(rng)
    dns = _observations(rng) if options.dns_check else None
    builder = IncrementalBuild(options)
    store = Store.from_objects(held.values())
    built: list[tuple[Dag, Store, DnsObservations | None]] = []
    kinds: dict[str, int] = {}
    asked = earlier = 0
    for step in range(60):
        result = builder.build(store, dns)
        kinds[result.kind] = kinds.get(result.kind, 0) + 1
        built.append((result.dag, store, dns))
        if rng.random() < 0.25:
            latest = rng.random() < 0.7
            dag, at, seen = built[-1] if latest else rng.choice(built)
            full = build(at, options, seen).service_targets
            assert dag.service_targets == full, f"seed {seed}, step {step}"
            asked += 1
            earlier += not latest
        if options.dns_check and rng.random() < 0.15:
            dns = _observations(rng) if rng.random() < 0.5 else _one_answer(rng, dns or {})
        else:
            store = _changed_store(rng, held, store)
    assert kinds.get("incremental", 0) >= 20, kinds
    assert asked >= 8 and earlier >= 2, (asked, earlier)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dns_check", [False, True])
def test_random_changes_with_xbackends_match_a_full_build(seed: int, dns_check: bool) -> None:
    rng = random.Random(seed)
    held = _initial(rng)
    # One XBackend served from the start: random changes take it away and bring others.
    held[("XBackend", "default", "xb-0")] = _one(xbackend("xb-0", "api.partner.example"))
    held[("HTTPRoute", "default", "route-7")] = _one(
        http_route("route-7", rules=[rule(xbackend_ref("xb-0"))], parents=[_edge()])
    )
    options = BuildOptions(dns_check=dns_check)
    partners = {
        "api.partner.example": DnsObservation(("192.0.2.50",)),
        "other.partner.example": DnsObservation(error="NXDOMAIN"),
    }
    dns = {**_observations(rng), **partners} if dns_check else None
    builder = IncrementalBuild(options)
    translation = Translation()
    store = Store.from_objects(held.values())
    served = 0

    def check(store: Store, step: int) -> tuple[str, Dag]:
        return _built_alike(builder, translation, store, options, dns, f"{seed}/{step}")

    for step in range(60):
        _, full = check(store, step)
        served += any(name.startswith("xbackend/") for name in full.clusters)
        store = _changed_store(rng, held, store, WITH_XBACKENDS)
    assert served > 0
    # Once the last XBackend is gone, changes are patched again.
    for key in [key for key in held if key[0] == "XBackend"]:
        del held[key]
    check(Store.from_objects(held.values()), 60)
    held[("HTTPRoute", "default", "route-7")] = _one(_http_route(rng, "default", "route-7"))
    assert check(Store.from_objects(held.values()), 61)[0] == "incremental"


def test_unchanged_parts_keep_their_objects_and_bytes() -> None:
    """A change to one route re-serializes its virtual host's table and nothing else: every
    other resource is the same object (bytes and hash), every other TypeSnapshot too."""
    rng = random.Random(7)
    held = {k: v for k, v in _initial(rng).items() if k[0] != "GRPCRoute"}

    mine = partial(http_route, "mine", parents=[_edge("http")], hostnames=["mine.example.org"])
    to_both = [backend_ref("mine", 80), backend_ref("kept", 80)]
    held[("HTTPRoute", "default", "mine")] = _one(
        mine(rules=[rule(*to_both, matches=[match("/one")])])
    )
    held[("Service", "default", "mine")] = _one(external_service("mine", "mine.example.net", 80))
    held[("Service", "default", "kept")] = _one(external_service("kept", "kept.example.net", 80))
    builder, translation = IncrementalBuild(), Translation()
    before = translation.translate(builder.build(Store.from_objects(held.values())).dag)
    held[("HTTPRoute", "default", "mine")] = _one(
        mine(rules=[rule(*to_both, matches=[match("/two")])])
    )
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
    held[("Service", "default", "mine")] = _one(external_service("mine", "moved.example.net", 80))
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


def test_endpoint_changes_make_only_their_load_assignments_again() -> None:
    """EndpointSlices changing alone: the clusters are those translated before (the same
    TypeSnapshot), only the changed Services' CLAs are made again, and every snapshot is the
    one a full translation makes, versions too (a slice gone: its cluster's CLA empty)."""
    held = {("Gateway", "default", "edge"): _one(gateway("edge", listeners=[listener("http")]))}
    for k in range(6):
        name = f"app{k}"
        held[("Service", "default", name)] = _one(service(name, 80, 8080))
        held[("EndpointSlice", "default", f"{name}-1")] = _one(
            endpoint_slice(name, 8080, f"10.0.0.{k + 1}")
        )
        route = http_route(name, name, 80, parents=[_edge()], hostnames=[f"{name}.example.com"])
        held[("HTTPRoute", "default", name)] = _one(route)
    store = Store.from_objects(held.values())
    builder, translation = IncrementalBuild(), Translation()
    last = translation.translate(builder.build(store).dag)
    moves = [("app1", "10.0.1.1"), ("app3", "10.0.1.3"), ("app1", "10.0.0.2"), ("app4", None)]
    dag = builder.dag
    for step, (name, address) in enumerate(moves):
        key = ("default", f"{name}-1")
        if address is None:
            store = store.with_object(type(held[("EndpointSlice", *key)]), key, None)
        else:
            changed = _one(endpoint_slice(name, 8080, address))
            store = store.with_object(type(changed), key, changed)
        result = builder.build(store)
        made = translation.translate(result.dag)
        assert result.kind == "endpoints"
        # The statuses are the previous Dag's; the load assignments say what they changed
        # (after the first patch: a full build's mapping is not one).
        assert dag is not None and result.dag.statuses is dag.statuses
        told = changed_keys_since(result.dag.load_assignments, dag.load_assignments)
        assert told == (None if step == 0 else {f"default/{name}/80"})
        dag = result.dag
        assert _bodies(made) == _bodies(translate(build(store, BuildOptions())))
        for group, snapshot in made.items():
            assert snapshot.of_type(CLUSTER) is last[group].of_type(CLUSTER)
            old, new = last[group].of_type(ENDPOINT), snapshot.of_type(ENDPOINT)
            again = {n for n, r in new.resources.items() if old.resources.get(n) is not r}
            assert again == {f"default/{name}/80"}, group
        last = made
