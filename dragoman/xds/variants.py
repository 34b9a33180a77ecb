"""Resources for clients on per-type streams: ADS config sources pointed at per-type streams.

Translation emits EDS clusters and RDS connection managers whose config source is `ads {}`.
A client fetching clusters over StreamClusters (or DeltaClusters) has no ADS stream, so the
clusters and listeners it is served name a per-type config source instead: its own kind
(SotW or delta) through the bootstrap's cluster for dragoman (`dragoman-xds` unless the
server is told another name: `serve --xds-cluster-name`). The rewrite is pure, done
once per distinct resource and variant, and shared by every stream of that variant.
"""

from __future__ import annotations

from collections import OrderedDict
from enum import Enum

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.config_source_pb2 import ConfigSource
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from google.protobuf.message import DecodeError

from dragoman.envoy.bootstrap import XDS_CLUSTER, per_type_config_source
from dragoman.xds.references import hcm_configs
from dragoman.xds.resources import CLUSTER, LISTENER, Resource, Snapshot, TypeSnapshot


class ConfigSources(Enum):
    """How a stream's client fetches the EDS and RDS resources its clusters and listeners name."""

    ADS = "ads"  # as translated: `ads {}`
    PER_TYPE_SOTW = "per-type"
    PER_TYPE_DELTA = "per-type-delta"


# Rewritten types kept: CDS and LDS of a few groups and both per-type variants. Each comes
# with its resources by original digest, so that the next version of the type rewrites only
# what changed; nothing else keeps rewritten resources alive.
_TYPE_CACHE_ENTRIES = 8

_Key = tuple[str, str, ConfigSources, str]  # type URL, original version, variant, cluster
_Made = tuple[TypeSnapshot, dict[str, Resource]]  # and rewritten resources by original digest
_rewritten_types: OrderedDict[_Key, _Made] = OrderedDict()


def snapshot_for(
    snapshot: Snapshot, sources: ConfigSources, cluster_name: str = XDS_CLUSTER
) -> Snapshot:
    """`snapshot` as a client using `sources` must see it (the same object for ADS), its
    per-type config sources naming the bootstrap cluster `cluster_name`."""
    if sources is ConfigSources.ADS:
        return snapshot
    types = dict(snapshot.types)
    for type_url in (CLUSTER, LISTENER):
        if type_url in types:
            types[type_url] = _rewritten_type(type_url, types[type_url], sources, cluster_name)
    return Snapshot(types=types)


def _rewritten_type(
    type_url: str, original: TypeSnapshot, sources: ConfigSources, cluster_name: str
) -> TypeSnapshot:
    key = (type_url, original.version, sources, cluster_name)
    found = _rewritten_types.get(key)
    if found is not None:
        _rewritten_types.move_to_end(key)
        return found[0]
    # Most recent first: the version this one most likely replaces.
    earlier = [
        made
        for (kind, _, variant, name), (_, made) in reversed(_rewritten_types.items())
        if kind == type_url and variant is sources and name == cluster_name
    ]
    delta = sources is ConfigSources.PER_TYPE_DELTA
    by_digest: dict[str, Resource] = {}
    resources: list[Resource] = []
    for resource in original.resources.values():
        rewritten = next((m[resource.digest] for m in earlier if resource.digest in m), None)
        if rewritten is None or rewritten.name != resource.name:
            rewritten = _rewritten(resource, delta, cluster_name)
        by_digest[resource.digest] = rewritten
        resources.append(rewritten)
    result = TypeSnapshot.of(resources)
    _rewritten_types[key] = (result, by_digest)
    if len(_rewritten_types) > _TYPE_CACHE_ENTRIES:
        _rewritten_types.popitem(last=False)
    return result


def _rewritten(resource: Resource, delta: bool, cluster_name: str) -> Resource:
    rewrite = _cluster if resource.type_url == CLUSTER else _listener
    body = rewrite(resource.body, delta, cluster_name)
    return resource if body is None else Resource.of_bytes(resource.name, resource.type_url, body)


def _cluster(body: bytes, delta: bool, cluster_name: str) -> bytes | None:
    """The cluster with a per-type EDS config source, or None if it has no ADS one."""
    try:
        cluster = Cluster.FromString(body)
    except DecodeError:
        return None
    if not _is_ads(cluster.eds_cluster_config.eds_config):
        return None
    cluster.eds_cluster_config.eds_config.CopyFrom(
        per_type_config_source(delta=delta, cluster_name=cluster_name)
    )
    return cluster.SerializeToString(deterministic=True)


def _listener(body: bytes, delta: bool, cluster_name: str) -> bytes | None:
    """The listener with per-type RDS config sources, or None if it has no ADS one."""
    try:
        listener = Listener.FromString(body)
    except DecodeError:
        return None
    changed = False
    for config in hcm_configs(listener):
        manager = hcm.HttpConnectionManager.FromString(config.value)
        if manager.HasField("rds") and _is_ads(manager.rds.config_source):
            manager.rds.config_source.CopyFrom(
                per_type_config_source(delta=delta, cluster_name=cluster_name)
            )
            config.value = manager.SerializeToString(deterministic=True)
            changed = True
    return listener.SerializeToString(deterministic=True) if changed else None


def _is_ads(source: ConfigSource) -> bool:
    return source.WhichOneof("config_source_specifier") == "ads"
