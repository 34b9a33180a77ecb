"""SnapshotCache: node groups and change notification."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.xds_builders import eds_cluster, snapshot


def test_node_naming_a_gateway_gets_that_group_alone_and_nothing_while_it_is_missing() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    everything = snapshot(clusters=[eds_cluster("a"), eds_cluster("b")])
    cache.set_snapshots({ALL_GATEWAYS: everything})
    # Dedicated to a Gateway that does not exist (yet): an empty group, never everything.
    assert cache.group_for("default/gateway") == "default/gateway"
    assert cache.missing_gateway("default/gateway")
    assert cache.snapshot_for("default/gateway").of_type(CLUSTER).resources == {}
    own = snapshot(clusters=[eds_cluster("b")])
    cache.set_snapshots({ALL_GATEWAYS: everything, "default/gateway": own})
    assert cache.group_for("default/gateway") == "default/gateway"
    assert not cache.missing_gateway("default/gateway")
    assert cache.snapshot_for("default/gateway") is own
    assert cache.group_for("other/gateway") == "other/gateway"


@pytest.mark.parametrize("node_cluster", ["", "edge", "a/b/c", "/gateway", "default/", "/"])
def test_only_a_node_cluster_not_naming_a_gateway_selects_every_gateway(node_cluster: str) -> None:
    cache = SnapshotCache()
    cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
    assert cache.group_for(node_cluster) == ALL_GATEWAYS
    assert not cache.missing_gateway(node_cluster)


def test_unknown_group_gets_an_empty_snapshot() -> None:
    assert (
        SnapshotCache(per_type=PerTypeConfigSources())
        .snapshot_for("nope")
        .of_type(CLUSTER)
        .resources
        == {}
    )


def test_every_waiter_wakes_once_per_change() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        assert not cache.ready
        waiters = [asyncio.ensure_future(cache.wait_for_change(0)) for _ in range(100)]
        ready = asyncio.ensure_future(cache.wait_ready())
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiters) and not ready.done()
        cache.set_snapshots({ALL_GATEWAYS: snapshot()})
        assert await asyncio.wait_for(asyncio.gather(*waiters), 5) == [1] * 100
        await asyncio.wait_for(ready, 5)
        assert cache.ready
        # A waiter behind the current generation returns at once: no change is missed.
        cache.set_snapshots({ALL_GATEWAYS: snapshot()})
        assert await asyncio.wait_for(cache.wait_for_change(0), 5) == 2

    asyncio.run(scenario())


def test_set_snapshot_replaces_one_group_and_wakes_streams() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        everything = snapshot(clusters=[eds_cluster("a")])
        cache.set_snapshots({ALL_GATEWAYS: everything})
        waiter = asyncio.ensure_future(cache.wait_for_change(cache.generation))
        own = snapshot(clusters=[eds_cluster("b")])
        cache.set_snapshot("default/gateway", own)
        assert await asyncio.wait_for(waiter, 5) == 2
        assert cache.snapshot_for(ALL_GATEWAYS) is everything
        assert cache.snapshot_for("default/gateway") is own
        assert cache.groups == frozenset({ALL_GATEWAYS, "default/gateway"})

    asyncio.run(scenario())
