"""v1 ConfigMap."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta, no_entries


@dataclass(frozen=True, slots=True)
class ConfigMap(KindObject):
    kind: ClassVar[str] = "ConfigMap"

    meta: ObjectMeta
    data: Mapping[str, str] = field(default_factory=no_entries)
