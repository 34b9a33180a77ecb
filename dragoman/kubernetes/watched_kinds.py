"""The kinds dragoman lists and watches (every row of `dragoman.objects.kinds`), and how the
client reaches them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dragoman.objects.kinds import KINDS, Kind
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object


@dataclass(frozen=True, slots=True)
class WatchedKind:
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # preferred first; the first one the parser and the API serve
    plural: str
    namespaced: bool = True
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
        """The call that lists (and, with watch=True, watches) this kind, with its path
        bound; `namespace` None means every namespace. It takes the generated list methods'
        keyword arguments and answers, as they do with `_preload_content=False`, the raw
        HTTP response."""
        path = "/apis/{group}/{version}" if self.group else "/api/{version}"
        values = {"group": self.group, "version": version, "plural": self.plural}
        if self.namespaced and namespace is not None:
            # (A path parameter, quoted by the client: a --namespace is the user's text.)
            path += "/namespaces/{namespace}"
            values["namespace"] = namespace
        return functools.partial(_list, client, path + "/{plural}", values)


# The generated list methods' keyword arguments, by the query parameter each one is.
_QUERY = {
    "limit": "limit",
    "_continue": "continue",
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
}


def _list(
    client: Any,
    path: str,
    path_params: dict[str, str],
    *,
    _preload_content: bool = False,
    _request_timeout: Any = None,
    **query: Any,
) -> Any:
    """GET `path` (its `{parameters}` filled in from `path_params`, quoted) through the
    client (its authentication and TLS), not through a generated API class: CoreV1Api's
    module alone imports hundreds of model classes (about 20 MiB of a server that reads raw
    JSON). Like those methods with `_preload_content=False`, a non-2xx answer raises
    ApiException and a 2xx one is returned unread."""
    from kubernetes.client.exceptions import ApiException

    assert not _preload_content, "the informer reads the raw response"
    request = client.param_serialize(
        method="GET",
        resource_path=path,
        path_params=path_params,
        query_params=[(_QUERY[name], value) for name, value in query.items() if value is not None],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = client.call_api(*request, _request_timeout=_request_timeout)
    if not 200 <= response.status <= 299:
        response.read()
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return response.response


def watched_kind(kind: Kind) -> WatchedKind:
    return WatchedKind(
        kind.kind,
        kind.group,
        kind.versions,
        kind.plural,
        kind.namespaced,
        kind.has_status,
    )


# One per row of the table of kinds, in its order.
WATCHED_KINDS: tuple[WatchedKind, ...] = tuple(watched_kind(kind) for kind in KINDS)

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
