"""In-cluster first, external fallback (for migrations): an ExternalName Service annotated
`dragoman.dev/prefer-service: <name>` is served by an Envoy aggregate cluster that sends to
the pod-backed Service `<name>` (same namespace, same port number) while it has healthy
endpoints, and to the external name when it has none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.objects import Service
from dragoman.store import NamespacedName

PREFER_SERVICE = "dragoman.dev/prefer-service"


@dataclass(frozen=True, slots=True)
class Preference:
    """The Service an ExternalName prefers, or why the annotation cannot be followed."""

    service: Service | None
    problem: str | None = None


def preferred_service(
    service: Service, services: Mapping[NamespacedName, Service]
) -> Preference | None:
    """None when `service` asks for no in-cluster preference."""
    name = service.meta.annotations.get(PREFER_SERVICE)
    if name is None or not service.is_external_name:
        return None
    namespace = service.meta.namespace
    here = f"Service {namespace}/{service.meta.name} annotation {PREFER_SERVICE}"
    name = name.strip()
    preferred = services.get((namespace, name))
    if not name or preferred is None:
        return Preference(
            None, f"{here}: Service {namespace}/{name} not found; serving the external name only"
        )
    if preferred.is_external_name:
        return Preference(
            None,
            f"{here}: Service {namespace}/{name} is an ExternalName, not pod-backed; serving "
            "the external name only",
        )
    return Preference(preferred)
