"""The discovery documents clients read before they use an API (/api, /apis, /version)."""

from __future__ import annotations

from typing import Any

from tests.support.kubeapi.resources import ResourceRegistry, ResourceType

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-08-27T00:00:00Z",
    "goVersion": "go1.24.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(registry: ResourceRegistry, group: str) -> dict[str, Any]:
    versions = [
        {"groupVersion": f"{group}/{version}", "version": version}
        for version in registry.versions_of(group)
    ]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def group_list(registry: ResourceRegistry) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(registry, group) for group in registry.groups()],
    }


def group(registry: ResourceRegistry, name: str) -> dict[str, Any] | None:
    if name not in registry.groups():
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(registry, name)}


def _resource_entries(rtype: ResourceType) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": _VERBS,
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    entries = [entry]
    if rtype.status_subresource:
        entries.append(
            {
                "name": f"{rtype.plural}/status",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    return entries


def resource_list(registry: ResourceRegistry, group: str, version: str) -> dict[str, Any] | None:
    served = registry.in_group_version(group, version)
    if not served:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for rtype in served for entry in _resource_entries(rtype)],
    }


def document_for(registry: ResourceRegistry, path: str, server_address: str) -> Any:
    """The discovery document at a path, or None when there is none."""
    parts = [part for part in path.split("/") if part]
    if parts == ["version"]:
        return KUBERNETES_VERSION
    if parts == ["api"]:
        return core_versions(server_address)
    if parts == ["api", "v1"]:
        return resource_list(registry, "", "v1")
    if parts == ["apis"]:
        return group_list(registry)
    if len(parts) == 2 and parts[0] == "apis":
        return group(registry, parts[1])
    if len(parts) == 3 and parts[0] == "apis":
        return resource_list(registry, parts[1], parts[2])
    return None
