"""Snapshots → YAML in Envoy's JSON mapping: what `dragoman render` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2, scoped_route_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.filters.http.credential_injector.v3 import credential_injector_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2,
)
from envoy.extensions.http.injected_credentials.generic.v3 import generic_pb2
from envoy.extensions.http.injected_credentials.oauth2.v3 import oauth2_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2, tls_pb2
from google.protobuf.message import Message

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.security.pem import holds_private_key
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Snapshot,
)

# Every type packed in an Any by the translators: json_format can only expand an Any whose
# type is registered, and importing a module registers its types.
ANY_TYPE_MODULES = (
    stream_pb2,
    dns_cluster_pb2,
    router_pb2,
    http_connection_manager_pb2,
    tls_inspector_pb2,
    tls_pb2,
    route_components_pb2,
    credential_injector_pb2,
    generic_pb2,
    oauth2_pb2,
)

# Fields holding secret material (a private key, an injected credential), shown only as
# this: the output is meant to be shared. Any other value holding a private key (by its
# content: PEM, or base64 of PEM or DER) is too.
SECRET_FIELDS = frozenset({"private_key", "generic_secret"})
REDACTED = "[redacted]"

# Section name and message class per type, in ADS order.
SECTIONS: tuple[tuple[str, str, type[Message]], ...] = (
    ("clusters", CLUSTER, cluster_pb2.Cluster),
    ("endpoints", ENDPOINT, endpoint_pb2.ClusterLoadAssignment),
    ("secrets", SECRET, secret_pb2.Secret),
    ("listeners", LISTENER, listener_pb2.Listener),
    ("scoped_routes", SCOPED_ROUTE, scoped_route_pb2.ScopedRouteConfiguration),
    ("routes", ROUTE, route_pb2.RouteConfiguration),
)
# Sections shown only when they hold something (groups without them render as before).
OPTIONAL_SECTIONS = frozenset({SCOPED_ROUTE})


def render_yaml(snapshots: Mapping[str, Snapshot]) -> str:
    """One YAML document per node group, sorted by group name, resources sorted by name."""
    return "".join(_group_document(name, snapshots[name]) for name in sorted(snapshots))


def _group_document(name: str, snapshot: Snapshot) -> str:
    label = "all gateways" if name == ALL_GATEWAYS else f"gateway {name}"
    document: dict[str, Any] = {"group": name}
    for section, type_url, message_class in SECTIONS:
        resources = snapshot.of_type(type_url).resources
        if not resources and type_url in OPTIONAL_SECTIONS:
            continue
        document[section] = [
            redacted(to_json_mapping(message_class.FromString(resources[key].body)))
            for key in sorted(resources)
        ]
    body = dump_yaml(document)
    return f"---\n# node group: {label}\n{body}"


def redacted(value: Any) -> Any:
    """A copy of plain JSON data with every SECRET_FIELDS value, and any text that holds a
    PEM private key wherever it is (an inline data source, a metadata value), replaced by
    REDACTED."""
    if isinstance(value, dict):
        return {
            key: REDACTED if key in SECRET_FIELDS else redacted(item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [redacted(item) for item in value]
    if isinstance(value, str) and holds_private_key(value):
        return REDACTED
    return value
