"""A TypeSnapshot kept up to date name by name is the snapshot TypeSnapshot.of makes of the
same resources: the same names in the same order, the same version, and it says which names
differ from the one it was made from."""

from __future__ import annotations

import random

from envoy.config.route.v3.route_pb2 import RouteConfiguration

from dragoman.snapshots.resources import Resource, TypeSnapshot
from dragoman.snapshots.sorted_listing import SortedListing


def table(name: str, generation: int = 0) -> Resource:
    return Resource.of(
        name, RouteConfiguration(name=name, request_headers_to_remove=[str(generation)])
    )


def same(listing: SortedListing, resources: dict[str, Resource]) -> None:
    whole = TypeSnapshot.of(resources.values())
    made = listing.snapshot
    assert list(made.resources) == list(whole.resources) == listing.names
    assert all(made.resources[n] is r for n, r in resources.items())
    assert made.version == whole.version


def test_a_listing_of_resources_is_their_type_snapshot() -> None:
    resources = {n: table(n) for n in ("b", "a", "c")}
    listing = SortedListing.of(resources.values())
    same(listing, resources)
    assert listing.snapshot.derived is None


def test_a_change_to_nothing_that_differs_is_the_listing_itself() -> None:
    resources = {n: table(n) for n in ("a", "b")}
    listing = SortedListing.of(resources.values())
    assert listing.changed({}) is listing
    assert listing.changed({"a": resources["a"], "zz": None}) is listing


def test_replaced_added_and_removed_names_are_put_in_place() -> None:
    original = {n: table(n) for n in ("a", "c", "e")}
    resources = dict(original)
    listing = SortedListing.of(resources.values())
    changes = {"c": table("c", 1), "b": table("b"), "e": None, "f": table("f")}
    changed = listing.changed(changes)
    resources.update({n: r for n, r in changes.items() if r is not None})
    del resources["e"]
    same(changed, resources)
    assert changed.snapshot.derived == (listing.snapshot.version, frozenset("cbef"))
    assert listing.names == ["a", "c", "e"]  # the listing it was made from is unchanged
    same(listing, original)


def test_many_random_changes_give_what_a_whole_listing_gives() -> None:
    rng = random.Random(3)
    names = [f"http-80/{i}-route.example.com" for i in range(60)]
    resources = {n: table(n) for n in rng.sample(names, 30)}
    listing = SortedListing.of(resources.values())
    for step in range(200):
        changes: dict[str, Resource | None] = {}
        for name in rng.sample(names, rng.randrange(1, 5)):
            changes[name] = None if rng.random() < 0.4 else table(name, step)
        before = listing.snapshot.version
        listing = listing.changed(changes)
        for name, resource in changes.items():
            if resource is None:
                resources.pop(name, None)
            else:
                resources[name] = resource
        same(listing, resources)
        derived = listing.snapshot.derived
        if derived is not None and listing.snapshot.version != before:
            assert derived[0] == before
