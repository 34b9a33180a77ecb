"""A change of a few clusters is patched into a group's CDS and EDS snapshots: the same
snapshots as a translation from nothing, and what a patch took out is not kept."""

from __future__ import annotations

from dragoman.dag.build import build
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.options import BuildOptions
from dragoman.envoy.translation.translator import Translation, translate
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, Snapshot
from dragoman.store import Store
from tests.support.builders import external_service, gateway, gateway_class, http_route, typed


def world(ports: dict[int, int]) -> Store:
    documents = [gateway_class(), gateway(port=8080)]
    for i, port in ports.items():
        documents.append(external_service(f"svc{i}", f"svc{i}.example.net", port=port))
        documents.append(http_route(f"r{i}", f"svc{i}", port=port, hostnames=[f"h{i}.example"]))
    return Store.from_objects(typed(*documents))


def upstream(snapshots: dict[str, Snapshot]) -> dict[str, tuple[str, list[str]]]:
    return {
        f"{group}/{type_url}": (
            snapshot.of_type(type_url).version,
            list(snapshot.of_type(type_url).resources),
        )
        for group, snapshot in snapshots.items()
        for type_url in (CLUSTER, ENDPOINT)
    }


def test_clusters_changed_added_and_removed_are_patched_in_as_a_full_translation_has_them() -> None:
    builder, translation = IncrementalBuild(), Translation()
    ports = {i: 80 for i in range(6)}
    translation.translate(builder.build(world(ports)).dag)
    for step, (i, port) in enumerate([(2, 81), (4, 443), (2, 80), (5, 8443)]):
        ports[i] = port
        store = world(ports)
        result = builder.build(store)
        assert result.kind == "incremental", step
        patched = translation.translate(result.dag)
        full = translate(build(store, BuildOptions()))
        assert upstream(patched) == upstream(full), step
        # The cluster a port change took away is no longer kept for reuse.
        served = {name for snapshot in full.values() for name in snapshot.of_type(CLUSTER).names}
        assert set(translation._clusters) == served, step
