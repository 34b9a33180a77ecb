"""Serialized resources and snapshots: bytes, digests, versions, and the names a resource
carries for serving's make-before-break order."""

from __future__ import annotations

import hashlib

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.route.v3.route_pb2 import RouteConfiguration

from dragoman.snapshots.resources import (
    ADS_ORDER,
    CLUSTER,
    EMPTY_TYPE,
    ENDPOINT,
    LISTENER,
    NO_REFERENCES,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
    ads_ordered,
    type_url_of,
)
from dragoman.xds.protocol.digest_maps import DigestMaps


def test_a_resource_is_its_deterministic_bytes_and_their_sha256() -> None:
    message = Cluster(name="a", type=Cluster.EDS)
    resource = Resource.of("a", message)
    assert resource.body == message.SerializeToString(deterministic=True)
    assert resource.digest == hashlib.sha256(resource.body).hexdigest()
    assert resource.type_url == CLUSTER == type_url_of(message)
    assert Resource.of_bytes("a", CLUSTER, resource.body) == resource


def test_a_resource_names_nothing_unless_translation_says_so() -> None:
    plain = Resource.of("a", Cluster(name="a", type=Cluster.EDS))
    assert plain.references == NO_REFERENCES == ()
    named = Resource.of("a", Cluster(name="a", type=Cluster.EDS), ("a",))
    assert named.references == ("a",)
    assert Resource.of_bytes("a", CLUSTER, named.body, ("b",)).references == ("b",)
    # The same bytes naming other resources are another resource (not equal), same digest.
    assert named != plain and named.digest == plain.digest


def test_type_urls_are_interned_once_per_type() -> None:
    first = Resource.of("a", RouteConfiguration(name="a"))
    second = Resource.of("b", RouteConfiguration(name="b"))
    assert first.type_url is second.type_url and first.type_url == ROUTE


def test_a_type_snapshot_is_sorted_by_name_and_versioned_by_content() -> None:
    a = Resource.of("a", Cluster(name="a"))
    b = Resource.of("b", Cluster(name="b"))
    snapshot = TypeSnapshot.of([b, a])
    assert list(snapshot.resources) == ["a", "b"]
    assert snapshot.names == {"a", "b"} and snapshot.names is snapshot.names
    assert TypeSnapshot.of([a, b]).version == snapshot.version
    changed = Resource.of("b", Cluster(name="b", type=Cluster.EDS))
    assert TypeSnapshot.of([a, changed]).version != snapshot.version
    assert len(snapshot.version) == 16


def test_a_type_snapshot_with_resources_replaced_is_the_one_made_of_them() -> None:
    made = [Resource.of(name, Cluster(name=name)) for name in ("c", "a", "b")]
    snapshot = TypeSnapshot.of(made)
    again = Resource.of("b", Cluster(name="b", type=Cluster.EDS))
    replaced = snapshot.replaced({"b": again})
    assert replaced == TypeSnapshot.of([made[0], made[1], again])
    assert list(replaced.resources) == ["a", "b", "c"]
    assert replaced.version != snapshot.version
    # Nothing different: the same snapshot.
    assert snapshot.replaced({"a": made[1]}) is snapshot
    assert snapshot.replaced({}) is snapshot


def test_snapshots_replaced_one_after_another_are_versioned_as_made_whole() -> None:
    """Each replacement hashes the previous listing with the new digests written in place:
    the version of a snapshot made of the same resources, names beyond ASCII and digests of
    another length included."""
    made = {n: Resource.of(n, Cluster(name=n)) for n in ("c", "a", "\u00e9t\u00e9/x", "b")}
    snapshot = TypeSnapshot.of(made.values())
    for step, name in enumerate(["b", "\u00e9t\u00e9/x", "a", "b"]):
        made[name] = Resource.of(name, Cluster(name=name, connect_timeout={"seconds": step}))
        snapshot = snapshot.replaced({name: made[name]})
        whole = TypeSnapshot.of(made.values())
        assert snapshot == whole and snapshot.version == whole.version
        assert snapshot.names == whole.names
    other = Resource("a", CLUSTER, b"", digest="short")
    shorter = snapshot.replaced({"a": other})
    assert shorter.version == TypeSnapshot.of({**made, "a": other}.values()).version


def test_a_snapshot_gives_an_empty_type_for_a_type_it_lacks() -> None:
    snapshot = Snapshot(types={CLUSTER: TypeSnapshot.of([Resource.of("a", Cluster(name="a"))])})
    assert snapshot.of_type(LISTENER) is EMPTY_TYPE
    assert EMPTY_TYPE.resources == {} and EMPTY_TYPE.version


def test_ads_order_is_make_before_break() -> None:
    assert ADS_ORDER == (CLUSTER, ENDPOINT, SECRET, LISTENER, SCOPED_ROUTE, ROUTE)
    other = "type.googleapis.com/example.Other"
    assert ads_ordered({ROUTE, other, CLUSTER, LISTENER}) == [CLUSTER, LISTENER, ROUTE, other]


def test_a_type_snapshot_patched_is_the_one_made_of_what_it_then_holds() -> None:
    made = {name: Resource.of(name, Cluster(name=name)) for name in ("b", "d", "f", "h")}
    snapshot = TypeSnapshot.of(made.values())
    new_a, new_e = Resource.of("a", Cluster(name="a")), Resource.of("e", Cluster(name="e"))
    again = Resource.of("d", Cluster(name="d", type=Cluster.EDS))
    patched = snapshot.patched({"e": new_e, "a": new_a, "d": again}, ["f", "z"])
    expected = TypeSnapshot.of([new_a, made["b"], again, new_e, made["h"]])
    assert patched == expected
    assert list(patched.resources) == ["a", "b", "d", "e", "h"]  # sorted, as `of` makes it
    assert patched.derived == (snapshot.version, frozenset({"a", "d", "e", "f"}))
    # Only names taken out: the rest in order; nothing at all: the same snapshot.
    assert snapshot.patched({}, ["b"]) == TypeSnapshot.of([made["d"], made["f"], made["h"]])
    assert snapshot.patched({"b": made["b"]}, ["y"]) is snapshot


def test_a_delta_stream_is_sent_what_a_patch_changed_added_and_removed() -> None:
    made = {name: Resource.of(name, Cluster(name=name)) for name in ("b", "d", "f", "h")}
    snapshot = TypeSnapshot.of(made.values())
    new_a = Resource.of("a", Cluster(name="a"))
    again = Resource.of("d", Cluster(name="d", type=Cluster.EDS))
    patched = snapshot.patched({"a": new_a, "d": again}, ["f"])
    whole = TypeSnapshot.of([new_a, made["b"], again, made["h"]])  # derived from nothing
    quick, slow = DigestMaps(), DigestMaps()
    for maps in (quick, slow):
        maps.digests_of(snapshot)
    expected = slow.shared_diff(snapshot.version, whole)
    assert expected == (("a", "d"), ("f",))
    assert quick.shared_diff(snapshot.version, patched) == expected
    assert quick.digests_of(patched) == slow.digests_of(whole)
