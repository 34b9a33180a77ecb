"""Status of CredentialInjectors: `conditions` Accepted (the spec can be used) and
ResolvedRefs (its Secret and key exist, in its namespace, and hold a value Envoy can send;
an OAuth2 token endpoint's backend resolves), per GEP-713's conventions. A message names
the Secret and key, never the value."""

from __future__ import annotations

from dragoman.dag.conditions import condition
from dragoman.dag.context import BuildContext
from dragoman.dag.model import ObjectStatus
from dragoman.dag.routes.credential_injectors import JudgedInjector, judged_injector
from dragoman.objects import CredentialInjector
from dragoman.objects.meta import DRAGOMAN_GROUP

API_VERSION = f"{DRAGOMAN_GROUP}/v1alpha1"


def credential_injector_statuses(context: BuildContext) -> list[ObjectStatus]:
    """The status of every CredentialInjector of the build's store, in key order."""
    injectors = context.store.credential_injectors
    return [_status(injectors[key], context) for key in sorted(injectors)]


def _status(injector: CredentialInjector, context: BuildContext) -> ObjectStatus:
    generation = injector.meta.generation
    judged = judged_injector(injector, context)
    accepted = condition("Accepted", True, "Accepted", "the injector is valid", generation)
    if injector.oauth2 is None:
        message = "the credential is read from its Secret"
    else:
        message = "the client secret is read from its Secret and the token endpoint resolves"
    if isinstance(judged, JudgedInjector) and judged.warnings:
        message += "; not served as asked: " + "; ".join(judged.warnings)
    resolved = condition("ResolvedRefs", True, "ResolvedRefs", message, generation)
    if not isinstance(judged, JudgedInjector):
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
