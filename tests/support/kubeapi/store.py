"""The versioned object store behind the test API server (the part etcd plays).

One global resourceVersion counts every write, as etcd's revision does. Every change is
kept in a bounded history so that watches can resume and paged lists stay consistent;
`compact()` forgets that history, after which older resourceVersions are "too old" (410).
"""

from __future__ import annotations

import copy
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.kubeapi import errors
from tests.support.kubeapi.defaults import Defaulter, initial_status
from tests.support.kubeapi.resources import ResourceRegistry, ResourceType

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (resource key, namespace or "", name)

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# The alphabet the server's name generator draws from (no vowels, no look-alikes).
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Writes to these never change the object's content, so they never bump generation.
_SERVER_METADATA = ("resourceVersion", "managedFields")


@dataclass(frozen=True)
class Change:
    """One committed write, as watches see it."""

    resource_version: int
    type: str  # ADDED, MODIFIED or DELETED
    resource: str  # ResourceType.key
    namespace: str
    name: str
    object: Obj  # the stored state; for DELETED the last state, carrying the delete's RV
    previous: Obj | None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _content(obj: Obj) -> Obj:
    """The object without what the server changes on every write."""
    content = copy.deepcopy(obj)
    metadata = content.get("metadata", {})
    for field in _SERVER_METADATA:
        metadata.pop(field, None)
    return content


def _generation_inputs(rtype: ResourceType, obj: Obj) -> Obj:
    """What a generation-tracking strategy compares to decide whether to bump generation."""
    skipped = {"metadata", "apiVersion", "kind"}
    if rtype.status_subresource:
        skipped.add("status")
    inputs = {k: v for k, v in obj.items() if k not in skipped}
    metadata = obj.get("metadata", {})
    if rtype.kind == "EndpointSlice":  # its strategy counts label changes as well
        inputs["labels"] = metadata.get("labels") or {}
    # Starting deletion bumps generation so controllers notice (registry store behaviour).
    inputs["deletionTimestamp"] = metadata.get("deletionTimestamp")
    return inputs


class ObjectStore:
    """Thread-safe object storage with resourceVersions, history and change notification."""

    def __init__(self, registry: ResourceRegistry, *, history_limit: int = 2000) -> None:
        self.registry = registry
        self.history_limit = history_limit
        self.condition = threading.Condition(threading.RLock())
        self._objects: dict[Key, Obj] = {}
        self._history: deque[Change] = deque()
        self._resource_version = 0
        self._compacted_through = 0  # history holds every change newer than this
        self._defaulter = Defaulter()
        self._namespaces = registry.find("namespaces")

    # ----------------------------------------------------------------- versions

    @property
    def resource_version(self) -> int:
        with self.condition:
            return self._resource_version

    @property
    def compacted_through(self) -> int:
        with self.condition:
            return self._compacted_through

    def compact(self) -> int:
        """Forgets all history: every resourceVersion older than the current one expires."""
        with self.condition:
            self._history.clear()
            self._compacted_through = self._resource_version
            self.condition.notify_all()
            return self._resource_version

    def changes_after(self, resource_version: int) -> list[Change]:
        with self.condition:
            self._require_history(resource_version, "watch")
            return [c for c in self._history if c.resource_version > resource_version]

    def wait_for_change(
        self, after: int, timeout: float, stop: Callable[[], bool] = lambda: False
    ) -> bool:
        """Blocks until a write newer than `after` exists, `stop()` is true, or time is up."""
        with self.condition:
            return self.condition.wait_for(
                lambda: self._resource_version > after or stop(), timeout=max(0.0, timeout)
            )

    def require_watchable(self, resource_version: int) -> None:
        """Raises 410 Expired when history no longer reaches back to `resource_version`."""
        with self.condition:
            self._require_history(resource_version, "watch")

    def wake_all(self) -> None:
        with self.condition:
            self.condition.notify_all()

    def _require_history(self, resource_version: int, purpose: str) -> None:
        if resource_version < self._compacted_through:
            if purpose == "watch":
                message = (
                    f"too old resource version: {resource_version} ({self._compacted_through})"
                )
            else:
                message = "The resourceVersion for the provided list is too old."
            raise errors.expired(message)

    # -------------------------------------------------------------------- reads

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        with self.condition:
            found = self._objects.get(self._key(rtype, namespace, name))
            if found is None:
                raise errors.not_found(rtype, name)
            return copy.deepcopy(found)

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matches: Callable[[Obj], bool] = lambda _: True,
        at: int | None = None,
    ) -> tuple[list[Obj], int]:
        """Matching objects sorted by (namespace, name) as etcd keys sort, and the list RV.

        With `at`, the state as it was at that resourceVersion (consistent paging).
        """
        with self.condition:
            if at is None or at >= self._resource_version:
                state = {k: v for k, v in self._objects.items() if k[0] == rtype.key}
                list_rv = self._resource_version
            else:
                state = self._state_at(rtype, at)
                list_rv = at
            items = [
                copy.deepcopy(obj)
                for key, obj in sorted(state.items())
                if (namespace is None or key[1] == namespace) and matches(obj)
            ]
            return items, list_rv

    def _state_at(self, rtype: ResourceType, resource_version: int) -> dict[Key, Obj]:
        self._require_history(resource_version, "list")
        state = {k: v for k, v in self._objects.items() if k[0] == rtype.key}
        for change in reversed(self._history):
            if change.resource_version <= resource_version:
                break
            if change.resource != rtype.key:
                continue
            key = (change.resource, change.namespace, change.name)
            if change.previous is None:
                state.pop(key, None)
            else:
                state[key] = change.previous
        return state

    # ------------------------------------------------------------------- writes

    def create(self, rtype: ResourceType, namespace: str, obj: Obj, *, admin: bool = False) -> Obj:
        """POST semantics; `admin` skips namespace admission and keeps the given status."""
        with self.condition:
            obj = copy.deepcopy(obj)
            metadata = obj.setdefault("metadata", {})
            namespace = namespace if rtype.namespaced else ""
            if not metadata.get("name") and metadata.get("generateName"):
                suffix = "".join(random.choices(_NAME_SUFFIX_ALPHABET, k=5))
                metadata["name"] = f"{metadata['generateName']}{suffix}"
            name = metadata.get("name", "")
            self._validate_name(rtype, name)
            if not admin:
                if metadata.get("resourceVersion"):
                    # etcd3 storage refuses this with a plain error, which becomes a 500.
                    raise errors.ApiError(
                        500,
                        "InternalError",
                        "Internal error occurred: resourceVersion should not be set on objects"
                        " to be created",
                    )
                if namespace and (self._namespaces.key, "", namespace) not in self._objects:
                    raise errors.not_found(self._namespaces, namespace)
            key = self._key(rtype, namespace, name)
            if key in self._objects:
                raise errors.already_exists(rtype, name)

            obj["apiVersion"] = rtype.api_version()
            obj["kind"] = rtype.kind
            if namespace:
                metadata["namespace"] = namespace
            else:
                metadata.pop("namespace", None)
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = _now()
            for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                metadata.pop(server_owned, None)
            if rtype.tracks_generation:
                metadata["generation"] = 1
            if rtype.status_subresource and not admin:
                status = initial_status(rtype.kind)
                if status is None:
                    obj.pop("status", None)
                else:
                    obj["status"] = status
            self._defaulter.apply(rtype.kind, obj, None)
            return copy.deepcopy(self._commit("ADDED", rtype, key, obj, None))

    def update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        obj: Obj,
        *,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """PUT semantics: the updated object and whether the PUT created it."""
        with self.condition:
            key = self._key(rtype, namespace, name)
            old = self._objects.get(key)
            if old is None:
                if rtype.allow_create_on_update and subresource is None:
                    return self.create(rtype, namespace, self._without_rv(obj)), True
                raise errors.not_found(rtype, name)
            self._check_resource_version(rtype, name, obj, old)
            return self._replace(rtype, key, old, obj, subresource=subresource), False

    def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        apply_patch: Callable[[Obj], Obj],
        *,
        subresource: str | None = None,
        create_if_missing: bool = False,
    ) -> tuple[Obj, bool]:
        """PATCH semantics: the patch applies to the current object under the store lock.

        A resourceVersion inside the patch is a precondition (409 if stale), as on the server.
        """
        with self.condition:
            key = self._key(rtype, namespace, name)
            old = self._objects.get(key)
            if old is None:
                if not create_if_missing or subresource is not None:
                    raise errors.not_found(rtype, name)
                seed: Obj = {"metadata": {"name": name}}
                if namespace:
                    seed["metadata"]["namespace"] = namespace
                return self.create(rtype, namespace, apply_patch(seed)), True
            patched = apply_patch(copy.deepcopy(old))
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch did not produce an object")
            patched_rv = patched.get("metadata", {}).get("resourceVersion")
            if patched_rv and patched_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rtype, name, errors.STALE_OBJECT)
            return self._replace(rtype, key, old, patched, subresource=subresource), False

    def delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        *,
        preconditions: dict[str, Any] | None = None,
        honour_finalizers: bool = True,
    ) -> tuple[Obj, bool]:
        """The object as deleted (or as marked for deletion) and whether it is gone now."""
        with self.condition:
            key = self._key(rtype, namespace, name)
            old = self._objects.get(key)
            if old is None:
                raise errors.not_found(rtype, name)
            self._check_preconditions(rtype, name, old, preconditions or {})
            if honour_finalizers and old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return copy.deepcopy(old), False
                marked = copy.deepcopy(old)
                marked["metadata"]["deletionTimestamp"] = _now()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                if rtype.tracks_generation:
                    marked["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
                return copy.deepcopy(self._commit("MODIFIED", rtype, key, marked, old)), False
            if rtype is self._namespaces:
                self._delete_namespace_contents(name)
            return copy.deepcopy(self._commit("DELETED", rtype, key, old, old)), True

    def apply(self, rtype: ResourceType, obj: Obj) -> Obj:
        """Creates or overwrites an object as given, status included (no RV check, no admission)."""
        with self.condition:
            metadata = obj.get("metadata", {})
            namespace = metadata.get("namespace", "default") if rtype.namespaced else ""
            key = self._key(rtype, namespace, metadata.get("name", ""))
            old = self._objects.get(key)
            if old is None:
                return self.create(rtype, namespace, self._without_rv(obj), admin=True)
            return self._replace(rtype, key, old, self._without_rv(obj), subresource="admin")

    # ---------------------------------------------------------------- internals

    @staticmethod
    def _key(rtype: ResourceType, namespace: str, name: str) -> Key:
        return (rtype.key, namespace if rtype.namespaced else "", name)

    @staticmethod
    def _without_rv(obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).pop("resourceVersion", None)
        return obj

    def _validate_name(self, rtype: ResourceType, name: str) -> None:
        if not name:
            raise errors.invalid(
                rtype,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
                "FieldValueRequired",
            )
        if rtype.kind == "Service":
            ok, rule = bool(_DNS1035_LABEL.match(name)) and len(name) <= 63, "RFC 1035 label"
        elif rtype.kind == "Namespace":
            ok, rule = bool(_DNS1123_LABEL.match(name)) and len(name) <= 63, "RFC 1123 label"
        else:
            ok, rule = bool(_SUBDOMAIN.match(name)) and len(name) <= 253, "RFC 1123 subdomain"
        if not ok:
            raise errors.invalid(
                rtype,
                name,
                "metadata.name",
                f'Invalid value: "{name}": a lowercase {rule} must consist of lower case'
                " alphanumeric characters or '-'",
                "FieldValueInvalid",
            )

    @staticmethod
    def _check_resource_version(rtype: ResourceType, name: str, new: Obj, old: Obj) -> None:
        wanted = new.get("metadata", {}).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype, name, errors.STALE_OBJECT)

    @staticmethod
    def _check_preconditions(
        rtype: ResourceType, name: str, old: Obj, preconditions: dict[str, Any]
    ) -> None:
        for field in ("uid", "resourceVersion"):
            wanted = preconditions.get(field)
            actual = old["metadata"].get(field)
            if wanted and wanted != actual:
                label = "UID" if field == "uid" else "ResourceVersion"
                raise errors.conflict(
                    rtype,
                    name,
                    f"Precondition failed: {label} in precondition: {wanted},"
                    f" {label} in object meta: {actual}",
                )

    def _replace(
        self, rtype: ResourceType, key: Key, old: Obj, new: Obj, *, subresource: str | None
    ) -> Obj:
        """Builds the next stored state from `new` and commits it if anything changed.

        `subresource` is None for the main resource, "status" for the status subresource
        and "admin" for test-side writes that may set everything.
        """
        name = key[2]
        if subresource == "status":
            # Only .status moves; everything else, metadata included, stays as stored.
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = copy.deepcopy(new["status"])
            else:
                result.pop("status", None)
        else:
            result = copy.deepcopy(new)
            metadata = result.setdefault("metadata", {})
            old_metadata = old["metadata"]
            if metadata.get("uid") and metadata["uid"] != old_metadata["uid"]:
                raise errors.conflict(
                    rtype,
                    name,
                    f"Precondition failed: UID in precondition: {metadata['uid']},"
                    f" UID in object meta: {old_metadata['uid']}",
                )
            for server_owned in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if server_owned in old_metadata:
                    metadata[server_owned] = old_metadata[server_owned]
                else:
                    metadata.pop(server_owned, None)
            metadata["name"] = name
            if key[1]:
                metadata["namespace"] = key[1]
            result["apiVersion"] = rtype.api_version()
            result["kind"] = rtype.kind
            if rtype.status_subresource and subresource != "admin":
                # Status changes through the main resource are silently dropped.
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            self._defaulter.apply(rtype.kind, result, old)
            if rtype.tracks_generation and _generation_inputs(rtype, result) != _generation_inputs(
                rtype, old
            ):
                metadata["generation"] = old_metadata.get("generation", 0) + 1

        result["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _content(result) == _content(old):
            return copy.deepcopy(old)  # a no-op write is not stored and keeps the RV
        if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            return copy.deepcopy(self._commit("DELETED", rtype, key, result, old))
        return copy.deepcopy(self._commit("MODIFIED", rtype, key, result, old))

    def _delete_namespace_contents(self, namespace: str) -> None:
        # Stands in for the namespace controller, which empties a namespace before it goes.
        for key in sorted(k for k in self._objects if k[1] == namespace):
            rtype = self.registry.find(key[0])
            doomed = self._objects[key]
            self._commit("DELETED", rtype, key, doomed, doomed)

    def _commit(
        self, change_type: str, rtype: ResourceType, key: Key, obj: Obj, old: Obj | None
    ) -> Obj:
        self._resource_version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._resource_version)
        if change_type == "DELETED":
            del self._objects[key]
        else:
            self._objects[key] = stored
        self._history.append(
            Change(self._resource_version, change_type, rtype.key, key[1], key[2], stored, old)
        )
        while len(self._history) > self.history_limit:
            self._compacted_through = self._history.popleft().resource_version
        self.condition.notify_all()
        return stored
