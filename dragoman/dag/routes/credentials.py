"""A rule's CredentialInjector ExtensionRef filters resolved to the credentials its routes
inject (and the clusters of their OAuth2 token endpoints); a rule whose injector cannot
inject answers 500, never forwarding a request without its credential."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dragoman.dag.context import BuildContext
from dragoman.dag.model import Cluster, InjectedCredential, Problem
from dragoman.dag.routes.credential_injectors import JudgedInjector, judged_injector
from dragoman.objects import ExtensionRef, ObjectKey

# The route's reason when an injector it names adds nothing (ResolvedRefs False).
INVALID_CREDENTIAL_INJECTOR = "InvalidCredentialInjector"


# The credentials of a rule, the clusters of their token endpoints (by name), and a Problem
# for each injector that cannot inject.
RuleCredentials = tuple[tuple[InjectedCredential, ...], Mapping[str, Cluster], tuple[Problem, ...]]
NO_CREDENTIALS: RuleCredentials = ((), {}, ())


def rule_credentials(
    route: ObjectKey,
    rule_index: int,
    refs: Sequence[tuple[int, ExtensionRef]],
    context: BuildContext,
) -> RuleCredentials:
    """The credentials of `refs` ((filter index, reference) of rule `rule_index`), the
    clusters of their OAuth2 token endpoints, and a Problem for each that cannot be injected
    (then the rule must answer 500)."""
    credentials: dict[str, InjectedCredential] = {}
    clusters: dict[str, Cluster] = {}
    problems: list[Problem] = []
    for index, ref in refs:
        field = f"spec.rules[{rule_index}].filters[{index}].extensionRef"
        injector = context.store.credential_injectors.get((route.namespace, ref.name))
        where = f"CredentialInjector {route.namespace}/{ref.name}"
        if injector is None:
            problems.append(_problem(route, field, f"{where} not found"))
            continue
        judged = judged_injector(injector, context)
        if isinstance(judged, JudgedInjector):
            credentials.setdefault(judged.credential.name, judged.credential)
            if judged.token_cluster is not None:
                clusters[judged.token_cluster.name] = judged.token_cluster
        else:
            problems.append(_problem(route, field, f"{where}: {judged.field} {judged.message}"))
    return tuple(credentials.values()), clusters, tuple(problems)


def _problem(route: ObjectKey, field: str, message: str) -> Problem:
    return Problem(
        route,
        field,
        INVALID_CREDENTIAL_INJECTOR,
        f"{message}; requests this rule matches answer 500 rather than go without the credential",
    )
