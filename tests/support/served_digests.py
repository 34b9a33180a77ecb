"""What a controller publishes, as comparable values: per node group and type, the
version and each resource's digest."""

from __future__ import annotations

from dragoman.runtime.controller import Controller

Served = dict[str, dict[str, tuple[str, dict[str, str]]]]


def served_digests(controller: Controller) -> Served:
    return {
        group: {
            type_url: (typed.version, {name: r.digest for name, r in typed.resources.items()})
            for type_url, typed in snapshot.types.items()
        }
        for group, snapshot in controller.snapshots.items()
    }
