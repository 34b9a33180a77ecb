"""The kinds dragoman lists and watches, one line each, and how the client reaches them.

A kind is watched only once the parser reads it (`dragoman.sources.parse.parse_object`
returns a typed object for it): until then its line here costs nothing, not even RBAC.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object


@dataclass(frozen=True, slots=True)
class WatchedKind:
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # preferred first; the first one the parser and the API serve
    plural: str
    namespaced: bool = True
    # Built-in kinds go through their generated API class (`api_class`, with methods
    # `list_namespaced_<stem>` / `list_<stem>_for_all_namespaces` / `list_<stem>`);
    # custom resources through CustomObjectsApi.
    api_class: str = ""
    stem: str = ""
    # dragoman writes the status of this kind (its status subresource) when the build
    # computes one.
    has_status: bool = False

    @property
    def resource(self) -> str:
        """`plural.group`, as RBAC and kubectl name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def list_call(self, client: Any, version: str, namespace: str | None) -> Callable[..., Any]:
        """The client method that lists (and, with watch=True, watches) this kind, with its
        positional arguments bound; `namespace` None means every namespace."""
        from kubernetes import client as k8s

        if self.api_class:
            api = getattr(k8s, self.api_class)(client)
            if not self.namespaced:
                return getattr(api, f"list_{self.stem}")
            if namespace is None:
                return getattr(api, f"list_{self.stem}_for_all_namespaces")
            return functools.partial(getattr(api, f"list_namespaced_{self.stem}"), namespace)
        custom = k8s.CustomObjectsApi(client)
        if not self.namespaced or namespace is None:
            return functools.partial(
                custom.list_cluster_custom_object, self.group, version, self.plural
            )
        return functools.partial(
            custom.list_namespaced_custom_object, self.group, version, namespace, self.plural
        )


def _builtin(
    kind: str, group: str, plural: str, api_class: str, stem: str, namespaced: bool = True
) -> WatchedKind:
    return WatchedKind(kind, group, ("v1",), plural, namespaced, api_class, stem)


def _gateway_api(
    kind: str,
    plural: str,
    versions: tuple[str, ...],
    namespaced: bool = True,
    has_status: bool = True,
) -> WatchedKind:
    return WatchedKind(kind, GATEWAY_GROUP, versions, plural, namespaced, has_status=has_status)


# Adding a kind is one line here (and a parser for it in dragoman.sources.parse).
WATCHED_KINDS: tuple[WatchedKind, ...] = (
    _builtin("Namespace", "", "namespaces", "CoreV1Api", "namespace", namespaced=False),
    _builtin("Service", "", "services", "CoreV1Api", "service"),
    _builtin(
        "EndpointSlice", "discovery.k8s.io", "endpointslices", "DiscoveryV1Api", "endpoint_slice"
    ),
    _builtin("Secret", "", "secrets", "CoreV1Api", "secret"),
    _builtin("ConfigMap", "", "configmaps", "CoreV1Api", "config_map"),
    _gateway_api("GatewayClass", "gatewayclasses", ("v1", "v1beta1"), namespaced=False),
    _gateway_api("Gateway", "gateways", ("v1", "v1beta1")),
    _gateway_api("HTTPRoute", "httproutes", ("v1", "v1beta1")),
    _gateway_api("GRPCRoute", "grpcroutes", ("v1",)),
    _gateway_api("ReferenceGrant", "referencegrants", ("v1", "v1beta1"), has_status=False),
    _gateway_api("BackendTLSPolicy", "backendtlspolicies", ("v1",)),
    _gateway_api("TCPRoute", "tcproutes", ("v1",)),
    _gateway_api("TLSRoute", "tlsroutes", ("v1",)),
    _gateway_api("UDPRoute", "udproutes", ("v1",)),
    _gateway_api("ListenerSet", "listenersets", ("v1",)),
)

KINDS_BY_NAME: dict[str, WatchedKind] = {kind.kind: kind for kind in WATCHED_KINDS}


def parser_reads(api_version: str, kind: str) -> bool:
    """Whether parse_object turns objects of this apiVersion and kind into typed objects.

    Asked with a skeleton object: None means the kind is not read; a problem with
    `apiVersion` means this version is not; anything else (an object, or problems with
    the skeleton's missing fields) means it is.
    """
    skeleton = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "probe"}}
    try:
        return parse_object(skeleton) is not None
    except ObjectError as error:
        return all(field != "apiVersion" for field, _ in error.problems)


def readable_versions(kind: WatchedKind) -> tuple[str, ...]:
    """The versions of a kind the parser reads, in the kind's order of preference."""
    return tuple(v for v in kind.versions if parser_reads(kind.api_version(v), kind.kind))


def served_kinds(kinds: tuple[WatchedKind, ...] = WATCHED_KINDS) -> tuple[WatchedKind, ...]:
    """The kinds worth watching now: those the parser reads in at least one version."""
    return tuple(kind for kind in kinds if readable_versions(kind))
