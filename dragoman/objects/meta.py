"""Identity and metadata shared by every object."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, NamedTuple

# The API group of dragoman's own kinds (BackendPolicy, CredentialInjector,
# EnvoyProxyParameters).
DRAGOMAN_GROUP: Final = "dragoman.dev"


class ObjectKey(NamedTuple):
    """`kind/namespace/name`: how errors, status and the store name an object.

    A named tuple: builds hash, compare and sort hundreds of thousands of these, and a
    tuple does all three in C (a dataclass's methods are Python code)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if not self.namespace:  # a cluster-scoped kind: GatewayClass/dragoman
            return f"{self.kind}/{self.name}"
        return f"{self.kind}/{self.namespace}/{self.name}"


class _EmptyMapping(Mapping[Any, Any]):
    """The one empty mapping that objects without labels, annotations (nearly all of them)
    or other optional maps share: a dict each would cost 64 bytes per object. Immutable, so
    no holder can change what the others see; pickled as a reference to the one instance."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __contains__(self, key: object) -> bool:
        return False

    def __repr__(self) -> str:
        return "{}"

    def __reduce__(self) -> str:
        return "EMPTY_MAPPING"


EMPTY_MAPPING: Mapping[Any, Any] = _EmptyMapping()


def no_entries() -> Mapping[Any, Any]:
    """EMPTY_MAPPING, as a field's default_factory (a mapping, shared or not, is no
    dataclass default)."""
    return EMPTY_MAPPING


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str = "default"
    generation: int = 0
    resource_version: str = ""
    uid: str = ""
    # RFC 3339 as the API server writes it; sorts chronologically as a string.
    creation_timestamp: str = ""
    labels: Mapping[str, str] = field(default_factory=no_entries)
    annotations: Mapping[str, str] = field(default_factory=no_entries)


@dataclass(frozen=True, slots=True)
class KindObject:
    """What every kind's object has: its metadata, and its key, made once when the object
    is (builds, stores and indexes read and hold it for every object, and one tuple per
    object costs less than one per read)."""

    kind: ClassVar[str]
    # Cluster-scoped kinds (GatewayClass, Namespace) are keyed with no namespace.
    cluster_scoped: ClassVar[bool] = False

    meta: ObjectMeta
    key: ObjectKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        meta = self.meta
        namespace = "" if self.cluster_scoped else meta.namespace
        object.__setattr__(self, "key", ObjectKey(self.kind, namespace, meta.name))
