"""A group's cluster names, kept sorted from one change to the next without sorting all."""

from __future__ import annotations

import random

from dragoman.dag.node_groups.group_index import sorted_names


def test_the_same_names_keep_the_previous_tuple() -> None:
    previous = ("a", "b", "c")
    assert sorted_names({"c", "a", "b"}, previous) is previous


def test_names_added_and_removed_are_merged_into_the_sorted_ones() -> None:
    rng = random.Random(7)
    names = {f"default/svc{i}/80" for i in range(500)}
    previous = tuple(sorted(names))
    for _ in range(50):
        names = set(names)
        for name in rng.sample(sorted(names), rng.randrange(4)):
            names.discard(name)
        names.update(f"default/svc{rng.randrange(1000)}/{rng.choice((80, 81))}" for _ in range(3))
        made = sorted_names(names, previous)
        assert made == tuple(sorted(names))
        previous = made


def test_many_names_changed_are_sorted_anew() -> None:
    names = {f"n{i}" for i in range(1000)}
    assert sorted_names(names, ("a",)) == tuple(sorted(names))
