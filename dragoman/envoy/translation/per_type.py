"""Resources for clients on per-type streams: translated with per-type config sources.

Serving hands each such client `PerTypeConfigSources.per_type` of its group's snapshot.

Translation for ADS clients names `ads {}` as the config source of EDS clusters, of RDS
connection managers and of SDS certificates. A client fetching clusters over StreamClusters
(or DeltaClusters) has no ADS stream, so the clusters and listeners it is served name a
per-type config source instead: its own kind (SotW or delta) through the bootstrap's cluster
for dragoman (`dragoman-xds`, or the name `serve --xds-cluster-name` gives). Each is
translated from the value its ADS resource was made from, once per distinct resource and
variant, and shared by every stream of that variant.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

from dragoman.envoy.bootstrap.envoy_bootstrap import XDS_CLUSTER
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.envoy.translation.translated import Translated
from dragoman.snapshots.resources import CLUSTER, LISTENER, Resource, Snapshot, TypeSnapshot

# Variant types kept: CDS and LDS of a few groups and both per-type variants. Each comes
# with its resources by original digest, so that the next version of the type translates
# only what changed; nothing else keeps variant resources alive.
TYPE_CACHE_ENTRIES = 8

# The types whose resources' bytes depend on the config source.
CONFIG_SOURCE_TYPES = (CLUSTER, LISTENER)

_Key = tuple[str, str, bool]  # type URL, original version, delta
_Made = tuple[TypeSnapshot, dict[str, Resource]]  # and variant resources by original digest


class PerTypeConfigSources:
    """Makes the snapshots per-type clients see; each instance remembers its own variants."""

    def __init__(self, cluster_name: str = XDS_CLUSTER, entries: int = TYPE_CACHE_ENTRIES) -> None:
        # What per-type clients' bootstraps call their cluster for dragoman.
        self.cluster_name = cluster_name
        self._entries = entries
        self._variant_types: OrderedDict[_Key, _Made] = OrderedDict()
        # The per-type options of each translation's options (one object for thousands of
        # resources), by id and kept with them so the id is not reused.
        self._options: dict[tuple[int, bool], tuple[TranslateOptions, TranslateOptions]] = {}

    def per_type(self, snapshot: Snapshot, *, delta: bool) -> Snapshot:
        """`snapshot` as a client on per-type streams (SotW, or delta) must see it."""
        types = dict(snapshot.types)
        for type_url in CONFIG_SOURCE_TYPES:
            if type_url in types:
                types[type_url] = self._variant_type(type_url, types[type_url], delta)
        return Snapshot(types=types)

    def __len__(self) -> int:
        """How many variant types are remembered."""
        return len(self._variant_types)

    def _variant_type(self, type_url: str, original: TypeSnapshot, delta: bool) -> TypeSnapshot:
        made_types = self._variant_types
        key = (type_url, original.version, delta)
        found = made_types.get(key)
        if found is not None:
            made_types.move_to_end(key)
            return found[0]
        # Most recent first: the version this one most likely replaces.
        earlier = [
            made
            for (kind, _, variant), (_, made) in reversed(made_types.items())
            if kind == type_url and variant is delta
        ]
        by_digest: dict[str, Resource] = {}
        resources: list[Resource] = []
        for resource in original.resources.values():
            variant = next((m[resource.digest] for m in earlier if resource.digest in m), None)
            if variant is None or variant.name != resource.name:
                variant = self._variant(resource, delta)
            by_digest[resource.digest] = variant
            resources.append(variant)
        result = TypeSnapshot.of(resources)
        made_types[key] = (result, by_digest)
        if len(made_types) > self._entries:
            made_types.popitem(last=False)
        return result

    def _variant(self, resource: Resource, delta: bool) -> Resource:
        """The resource translated again with per-type config sources (itself when that
        changes nothing, or when it was not translated from a value)."""
        if not isinstance(resource, Translated) or resource.options is None:
            return resource
        known = self._options.get((id(resource.options), delta))
        if known is None:
            variant = dataclasses.replace(
                resource.options,
                config_sources="per-type-delta" if delta else "per-type",
                xds_cluster_name=self.cluster_name,
            )
            if len(self._options) >= 2 * TYPE_CACHE_ENTRIES:
                self._options.clear()
            known = self._options[(id(resource.options), delta)] = (resource.options, variant)
        return resource.translated_with(known[1])
