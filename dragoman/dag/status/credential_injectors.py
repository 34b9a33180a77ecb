"""Status of CredentialInjectors: `conditions` Accepted (the spec can be used) and
ResolvedRefs (its Secret and key exist, in its namespace, and hold a value Envoy can send),
per GEP-713's conventions. A message names the Secret and key, never the value."""

from __future__ import annotations

from dragoman.dag.conditions import condition
from dragoman.dag.model import InjectedCredential, ObjectStatus
from dragoman.dag.routes.credential_injectors import judged_injector
from dragoman.objects import CredentialInjector
from dragoman.objects.meta import DRAGOMAN_GROUP
from dragoman.store import Store

API_VERSION = f"{DRAGOMAN_GROUP}/v1alpha1"


def credential_injector_statuses(store: Store) -> list[ObjectStatus]:
    """The status of every CredentialInjector of `store`, in key order."""
    return [
        _status(store.credential_injectors[key], store)
        for key in sorted(store.credential_injectors)
    ]


def _status(injector: CredentialInjector, store: Store) -> ObjectStatus:
    generation = injector.meta.generation
    judged = judged_injector(injector, store)
    accepted = condition("Accepted", True, "Accepted", "the injector is valid", generation)
    resolved = condition(
        "ResolvedRefs", True, "ResolvedRefs", "the credential is read from its Secret", generation
    )
    if not isinstance(judged, InjectedCredential):
        message = f"{judged.field}: {judged.message}"
        if judged.spec:
            accepted = condition("Accepted", False, judged.reason, message, generation)
            resolved = condition(
                "ResolvedRefs", False, judged.reason, "the injector is not accepted", generation
            )
        else:
            resolved = condition("ResolvedRefs", False, judged.reason, message, generation)
    return ObjectStatus(
        key=injector.key, api_version=API_VERSION, status={"conditions": [accepted, resolved]}
    )
