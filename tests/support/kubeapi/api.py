"""The REST layer: URLs, verbs and query parameters onto store operations.

It knows nothing of sockets: `handle` takes a parsed request and returns either a reply
to send or a watch session to stream, so the HTTP layer stays a thin shell.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.support.kubeapi import discovery, errors
from tests.support.kubeapi.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    json_patch,
    merge_patch,
    strip_directives,
)
from tests.support.kubeapi.resources import ResourceRegistry
from tests.support.kubeapi.routing import NOT_FOUND_MESSAGE, Target, parse_target, verb_for
from tests.support.kubeapi.selectors import object_matcher
from tests.support.kubeapi.store import Obj, ObjectStore
from tests.support.kubeapi.traffic import InjectedFailures, Outages, RequestCounts
from tests.support.kubeapi.watch import WatchRequest, WatchSession

log = logging.getLogger(__name__)

HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
# Paths anyone may read, as with the system:public-info-viewer role.
PUBLIC_PATHS = HEALTH_PATHS | {"/version"}
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result."
    " You can start a new list without the continue parameter."
)


@dataclass
class Reply:
    status: int
    body: Any  # a JSON document, or str for plain-text health checks
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    token: str | None  # bearer token every non-public request must carry; None: no auth
    bookmark_interval: float
    too_large_wait: float
    default_watch_timeout: float


class RestApi:
    """Serves the Kubernetes REST API from an ObjectStore."""

    def __init__(
        self,
        store: ObjectStore,
        settings: Settings,
        server_address: Callable[[], str],
        counts: RequestCounts,
        failures: InjectedFailures,
        outages: Outages | None = None,
    ) -> None:
        self.store = store
        self.registry: ResourceRegistry = store.registry
        self.settings = settings
        self.server_address = server_address
        self.counts = counts
        self.failures = failures
        self.outages = outages or Outages()

    # ------------------------------------------------------------------ entry

    def handle(
        self, method: str, raw_target: str, headers: Mapping[str, str], body: bytes
    ) -> Reply | WatchSession:
        """Serves one request; `headers` are keyed by lower-case name."""
        url = urlsplit(raw_target)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if url.path not in PUBLIC_PATHS and not self._authorized(headers):
                return self._error(errors.ApiError(401, "Unauthorized", "Unauthorized"))
            target = parse_target(self.registry, url.path)
            verb = verb_for(method, target, query)
            # Discovery documents are counted by path.
            self.counts.add(verb, target.counted_as if target else url.path)
            injected = self.failures.take(method, raw_target)
            if injected is not None:
                return self._error(injected)
            if target is None:
                return self._discovery(method, url.path)
            if self.outages.withdrawn(target.rtype.plural):
                # As when a CRD's handler is gone: every version, every verb.
                raise errors.ApiError(404, "NotFound", NOT_FOUND_MESSAGE)
            reply = self._serve(verb, target, query, headers, body)
            if isinstance(reply, WatchSession) and self.outages.take_silence(raw_target):
                reply.silent = True
            return reply
        except errors.ApiError as failure:
            return self._error(failure)
        except Exception as failure:  # a bug here must reach the test as a 500, not a hang
            log.exception("%s %s failed", method, raw_target)
            return self._error(
                errors.ApiError(500, "InternalError", f"Internal error occurred: {failure!r}")
            )

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        if self.settings.token is None:
            return True
        return headers.get("authorization", "") == f"Bearer {self.settings.token}"

    @staticmethod
    def _error(failure: errors.ApiError) -> Reply:
        headers = {}
        if failure.retry_after_seconds is not None:
            headers["Retry-After"] = str(failure.retry_after_seconds)
        return Reply(failure.code, failure.status(), headers)

    def _discovery(self, method: str, path: str) -> Reply:
        if method != "GET":
            raise errors.method_not_allowed()
        if path in HEALTH_PATHS:
            return Reply(200, "ok")
        document = discovery.document_for(self.registry, path, self.server_address())
        if document is None:
            raise errors.ApiError(404, "NotFound", NOT_FOUND_MESSAGE)
        return Reply(200, document)

    # ---------------------------------------------------------------- verbs

    def _serve(
        self,
        verb: str,
        target: Target,
        query: dict[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> Reply | WatchSession:
        if verb == "watch":
            return self._watch(target, query)
        if verb == "list":
            return Reply(200, self._list(target, query))
        if verb == "deletecollection":
            return self._delete_collection(target, query)
        if target.rtype.namespaced and target.namespace is None:
            raise errors.method_not_allowed()
        namespace = target.namespace or ""
        rtype = target.rtype
        if verb == "get":
            found = self.store.get(rtype, namespace, target.name or "")
            return Reply(200, self._shown(target, found))
        if verb == "create":
            obj = self._decode_object(target, body)
            self._check_namespace(target, obj)
            return Reply(201, self._shown(target, self.store.create(rtype, namespace, obj)))
        if verb == "update":
            obj = self._decode_object(target, body)
            self._check_namespace(target, obj)
            body_name = obj.get("metadata", {}).get("name", "")
            if body_name != target.name:
                raise errors.bad_request(
                    f"the name of the object ({body_name}) does not match the name on the URL"
                    f" ({target.name})"
                )
            updated, created = self.store.update(
                rtype, namespace, target.name, obj, subresource=target.subresource
            )
            return Reply(201 if created else 200, self._shown(target, updated))
        if verb == "patch":
            return self._patch(target, query, headers, body)
        return self._delete(target, body)

    def _shown(self, target: Target, obj: Obj) -> Obj:
        obj["apiVersion"] = target.rtype.api_version(target.version)
        return obj

    def _decode_object(self, target: Target, body: bytes) -> Obj:
        try:
            obj = json.loads(body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as failure:
            raise errors.bad_request(f"the request body is not valid JSON: {failure}") from None
        if not isinstance(obj, dict):
            raise errors.bad_request("the request body must be a JSON object")
        expected = target.rtype.api_version(target.version)
        if obj.get("apiVersion") and obj["apiVersion"] != expected:
            raise errors.bad_request(
                f"the API version in the data ({obj['apiVersion']}) does not match the expected"
                f" API version ({expected})"
            )
        if obj.get("kind") and obj["kind"] != target.rtype.kind:
            raise errors.bad_request(
                f"the kind in the data ({obj['kind']}) does not match the expected kind"
                f" ({target.rtype.kind})"
            )
        return obj

    @staticmethod
    def _check_namespace(target: Target, obj: Obj) -> None:
        given = obj.get("metadata", {}).get("namespace")
        if target.rtype.namespaced and given and given != target.namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the"
                " request"
            )

    def _patch(
        self, target: Target, query: dict[str, str], headers: Mapping[str, str], body: bytes
    ) -> Reply:
        content_type = headers.get("content-type", "").split(";")[0].strip()
        rtype = target.rtype
        try:
            document = yaml.safe_load(body) if content_type == APPLY_PATCH else json.loads(body)
        except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as failure:
            raise errors.bad_request(f"the patch is not valid: {failure}") from None
        create_if_missing = False
        if content_type == JSON_PATCH:

            def apply_patch(current: Obj) -> Obj:
                return json_patch(current, document)
        elif content_type == MERGE_PATCH or (
            content_type == STRATEGIC_MERGE_PATCH and rtype.builtin
        ):
            patch_document = strip_directives(document)

            def apply_patch(current: Obj) -> Obj:
                return merge_patch(current, patch_document)
        elif content_type == APPLY_PATCH:
            # Server-side apply, approximated as a merge that creates a missing object.
            if not query.get("fieldManager"):
                raise errors.bad_request("PATCH /apply requires fieldManager to be set")
            create_if_missing = True

            def apply_patch(current: Obj) -> Obj:
                return merge_patch(current, document)
        else:
            accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
            if rtype.builtin:
                accepted.insert(2, STRATEGIC_MERGE_PATCH)
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types"
                f" include: {', '.join(accepted)}",
            )
        patched, created = self.store.patch(
            rtype,
            target.namespace or "",
            target.name or "",
            apply_patch,
            subresource=target.subresource,
            create_if_missing=create_if_missing,
        )
        return Reply(201 if created else 200, self._shown(target, patched))

    def _delete(self, target: Target, body: bytes) -> Reply:
        try:
            options = json.loads(body) if body.strip() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as failure:
            raise errors.bad_request(f"the DeleteOptions are not valid JSON: {failure}") from None
        deleted, gone = self.store.delete(
            target.rtype,
            target.namespace or "",
            target.name or "",
            preconditions=(options or {}).get("preconditions"),
        )
        if not gone:
            return Reply(202, self._shown(target, deleted))
        if target.rtype.returns_deleted_object:
            return Reply(200, self._shown(target, deleted))
        metadata = deleted["metadata"]
        return Reply(200, errors.success(target.rtype, metadata["name"], metadata["uid"]))

    def _delete_collection(self, target: Target, query: dict[str, str]) -> Reply:
        if target.rtype.namespaced and target.namespace is None:
            raise errors.method_not_allowed()
        matcher = self._matcher(target, query)
        items, _ = self.store.list(target.rtype, target.namespace, matcher)
        deleted = []
        for item in items:
            metadata = item["metadata"]
            try:
                gone, _ = self.store.delete(
                    target.rtype, metadata.get("namespace", ""), metadata["name"]
                )
            except errors.ApiError:
                continue  # deleted meanwhile
            deleted.append(self._list_item(target, gone))
        return Reply(200, self._list_document(target, deleted, self.store.resource_version))

    # ----------------------------------------------------------- list & watch

    def _matcher(self, target: Target, query: dict[str, str]) -> Callable[[Obj], bool]:
        supported = {"metadata.name", "metadata.namespace", *target.rtype.extra_field_labels}
        return object_matcher(query.get("labelSelector"), query.get("fieldSelector"), supported)

    @staticmethod
    def _resource_version(query: dict[str, str]) -> int | None:
        """The requested resourceVersion, None for unset or "0" (any version will do)."""
        text = query.get("resourceVersion", "")
        if text in ("", "0"):
            return None
        try:
            return int(text)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {text!r}") from None

    def _wait_until_current(self, resource_version: int) -> None:
        """Reads at a resourceVersion the store has not reached wait briefly, then 504."""
        give_up = time.monotonic() + self.settings.too_large_wait
        while self.store.resource_version < resource_version:
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                raise errors.too_large_resource_version(
                    resource_version, self.store.resource_version
                )
            self.store.wait_for_change(resource_version - 1, remaining)

    def _list(self, target: Target, query: dict[str, str]) -> Obj:
        matcher = self._matcher(target, query)
        requested = self._resource_version(query)
        match = query.get("resourceVersionMatch", "")
        token = query.get("continue", "")
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise errors.bad_request(f"invalid limit: {query.get('limit')!r}") from None
        if match and "resourceVersion" not in query:
            raise errors.ApiError(
                422,
                "Invalid",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            )

        start_after: tuple[str, str] | None = None
        if token:
            if query.get("resourceVersion"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            at, start_after = _decode_continue(token)
            try:
                items, list_rv = self.store.list(target.rtype, target.namespace, matcher, at)
            except errors.ApiError as failure:
                if failure.code == 410:
                    raise errors.expired(EXPIRED_CONTINUE) from None
                raise
            items = [item for item in items if _sort_key(item) > start_after]
        elif match == "Exact":
            if requested is None:
                raise errors.ApiError(
                    422,
                    "Invalid",
                    'resourceVersionMatch "Exact" is forbidden for resourceVersion "0"',
                )
            self._wait_until_current(requested)
            items, list_rv = self.store.list(target.rtype, target.namespace, matcher, requested)
        else:
            if requested is not None:  # NotOlderThan, also the legacy meaning
                self._wait_until_current(requested)
            items, list_rv = self.store.list(target.rtype, target.namespace, matcher)

        metadata_extra: dict[str, Any] = {}
        if limit > 0 and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            metadata_extra["continue"] = _encode_continue(list_rv, _sort_key(items[-1]))
            if not query.get("labelSelector") and not query.get("fieldSelector"):
                metadata_extra["remainingItemCount"] = remaining
        document = self._list_document(
            target, [self._list_item(target, item) for item in items], list_rv
        )
        document["metadata"].update(metadata_extra)
        return document

    def _list_item(self, target: Target, obj: Obj) -> Obj:
        if target.rtype.builtin:
            # Typed lists carry the type once, on the list; items have no kind/apiVersion.
            obj.pop("apiVersion", None)
            obj.pop("kind", None)
            return obj
        return self._shown(target, obj)

    def _list_document(self, target: Target, items: list[Obj], list_rv: int) -> Obj:
        return {
            "kind": target.rtype.list_kind,
            "apiVersion": target.rtype.api_version(target.version),
            "metadata": {"resourceVersion": str(list_rv)},
            "items": items,
        }

    def _watch(self, target: Target, query: dict[str, str]) -> WatchSession:
        allow_bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        send_initial = query.get("sendInitialEvents") in ("true", "1")
        if send_initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise errors.ApiError(
                422,
                "Invalid",
                "sendInitialEvents is forbidden unless resourceVersionMatch is NotOlderThan",
            )
        timeout = 0.0
        if query.get("timeoutSeconds"):
            try:
                timeout = float(query["timeoutSeconds"])
            except ValueError:
                raise errors.bad_request("invalid timeoutSeconds") from None
        if timeout <= 0:  # unset or 0: the server picks (the real one, 30 to 60 minutes)
            timeout = self.settings.default_watch_timeout
        request = WatchRequest(
            rtype=target.rtype,
            version=target.version,
            namespace=target.namespace,
            matches=self._matcher(target, query),
            resource_version=self._resource_version(query),
            allow_bookmarks=allow_bookmarks,
            send_initial_events=send_initial,
            timeout_seconds=timeout,
        )
        return WatchSession(
            self.store,
            request,
            bookmark_interval=self.settings.bookmark_interval,
            too_large_wait=self.settings.too_large_wait,
        )


def _sort_key(obj: Obj) -> tuple[str, str]:
    metadata = obj.get("metadata", {})
    return metadata.get("namespace", ""), metadata.get("name", "")


def _encode_continue(list_rv: int, last: tuple[str, str]) -> str:
    token = {"v": "meta.k8s.io/v1", "rv": list_rv, "start": list(last)}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = decoded["start"]
        return int(decoded["rv"]), (str(namespace), str(name))
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise errors.bad_request("continue key is not valid") from None
