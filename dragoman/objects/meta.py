"""Identity and metadata shared by every object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


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


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str = "default"
    generation: int = 0
    resource_version: str = ""
    uid: str = ""
    # RFC 3339 as the API server writes it; sorts chronologically as a string.
    creation_timestamp: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
