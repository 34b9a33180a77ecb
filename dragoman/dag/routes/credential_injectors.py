"""CredentialInjectors judged: the header each one adds and the value it reads from its
Secret, or why it cannot add it (the field at fault, a reason and a message, which never
quote the value).

Judged once per injector, for the routes that name it (dag/routes/actions.py) and for the
injector's own status (dag/status/credential_injectors.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.dag.model import InjectedCredential
from dragoman.dag.routes.envoy_strings import header_name_problem, header_value_problem
from dragoman.objects import CredentialInjector
from dragoman.store import Store

# Reasons of the injector's ResolvedRefs condition (and of the routes that name it).
SECRET_NOT_FOUND = "SecretNotFound"
REF_NOT_PERMITTED = "RefNotPermitted"
INVALID_CREDENTIAL = "InvalidCredential"


@dataclass(frozen=True, slots=True)
class InjectorRefusal:
    """Why an injector adds nothing: `field` of the injector, `reason`, `message`."""

    field: str
    reason: str
    message: str
    # The spec itself is wrong (Accepted False), not only what it refers to.
    spec: bool = False


def judged_injector(
    injector: CredentialInjector, store: Store
) -> InjectedCredential | InjectorRefusal:
    """The credential `injector` adds, read from its Secret in `store`, or why it cannot."""
    name_problem = (
        "the Host header cannot carry a credential"
        if injector.header.lower() == "host"
        else header_name_problem(injector.header, editable_host=True)
    )
    if name_problem is not None:
        return InjectorRefusal("spec.header", "Invalid", name_problem, spec=True)
    ref = injector.secret_ref
    if ref is None:
        return InjectorRefusal("spec.secretRef", "Invalid", "is required", spec=True)
    namespace = injector.meta.namespace
    if ref.namespace is not None and ref.namespace != namespace:
        return InjectorRefusal(
            "spec.secretRef.namespace",
            REF_NOT_PERMITTED,
            f"the Secret must be in the injector's own namespace ({namespace}), not "
            f"{ref.namespace}: credentials are not read across namespaces",
        )
    secret = store.secrets.get((namespace, ref.name))
    if secret is None:
        return InjectorRefusal(
            "spec.secretRef.name", SECRET_NOT_FOUND, f"Secret {namespace}/{ref.name} not found"
        )
    value = secret.data.get(ref.key)
    if value is None:
        return InjectorRefusal(
            "spec.secretRef.key",
            SECRET_NOT_FOUND,
            f"Secret {namespace}/{ref.name} has no key {ref.key!r}",
        )
    why = _value_problem(value)
    if why is not None:
        return InjectorRefusal(
            "spec.secretRef.key",
            INVALID_CREDENTIAL,
            f"the value of key {ref.key!r} of Secret {namespace}/{ref.name} {why}",
        )
    return InjectedCredential(
        name=f"{namespace}/{injector.meta.name}",
        header=injector.header,
        overwrite=injector.overwrite,
        value=value,
    )


def _value_problem(value: bytes) -> str | None:
    """Why Envoy could not send `value` as a header value (never quoting it), or None."""
    if not value:
        return "is empty"
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    why = header_value_problem(text)
    if why is not None and text.endswith("\n"):
        return why + " (it ends with a newline: was the Secret made from a file?)"
    return why
