"""What a request URL and method name: the resource, namespace, object and verb."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.kubeapi import errors
from tests.support.kubeapi.resources import ResourceRegistry, ResourceType

NOT_FOUND_MESSAGE = "the server could not find the requested resource"


@dataclass(frozen=True)
class Target:
    """What a resource URL names."""

    rtype: ResourceType
    version: str
    namespace: str | None  # None: cluster-scoped, or a list/watch across all namespaces
    name: str | None  # None: the collection
    subresource: str | None  # "status" or None

    @property
    def counted_as(self) -> str:
        """The resource name request counts use: "services", "gateways/status"."""
        if self.subresource:
            return f"{self.rtype.plural}/{self.subresource}"
        return self.rtype.plural


def _not_found() -> errors.ApiError:
    return errors.ApiError(404, "NotFound", NOT_FOUND_MESSAGE)


def parse_target(registry: ResourceRegistry, path: str) -> Target | None:
    """The resource a URL names, or None for non-resource paths (discovery, health)."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"] and len(parts) > 2:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) > 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    # /namespaces/{ns}/{resource}/... but not /namespaces/{name}/status
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    rtype = registry.for_path(group, version, rest[0])
    if rtype is None or len(rest) > 3:
        raise _not_found()
    if namespace is not None and not rtype.namespaced:
        raise _not_found()
    if rtype.namespaced and namespace is None and len(rest) > 1:
        raise _not_found()
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if subresource is not None and (subresource != "status" or not rtype.status_subresource):
        raise _not_found()
    return Target(rtype, version, namespace, name, subresource)


def verb_for(method: str, target: Target | None, query: dict[str, str]) -> str:
    """The Kubernetes verb (get, list, watch, create, update, patch, delete, ...)."""
    if target is None:
        return "get"
    if target.name is None:
        verbs = {
            "GET": "watch" if query.get("watch") in ("true", "1") else "list",
            "POST": "create",
            "DELETE": "deletecollection",
        }
    else:
        verbs = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    verb = verbs.get(method)
    if verb is None:
        raise errors.method_not_allowed()
    return verb
