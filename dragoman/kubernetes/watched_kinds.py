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


def watched_kind(kind: Kind) -> WatchedKind:
    return WatchedKind(
        kind.kind,
        kind.group,
        kind.versions,
        kind.plural,
        kind.namespaced,
        kind.api_class,
        kind.stem,
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
