"""What a change reaches: the routes whose entries it can change (by what each route read),
and whether new listener verdicts differ only in their certificates (a rotation)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from dragoman.dag.frontends.listeners import Frontends
from dragoman.dag.incremental.changes import StoreChanges
from dragoman.dag.incremental.entries import ROUTE_FIELDS
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.reference_grants import ReferenceGrants
from dragoman.objects import ObjectKey
from dragoman.store import NamespacedName, Store


def reached_routes(
    routes: RouteIndex,
    before: Store,
    after: Store,
    changes: StoreChanges,
    observed: Iterable[str],
    with_names: bool,
) -> set[ObjectKey]:
    """The routes whose entries `changes` (from `before` to `after`) and the external names
    the DNS check `observed` anew can change. `with_names`: routes record the backends they
    reach (BackendTLSPolicies or the DNS check)."""
    reached: set[ObjectKey] = set()
    # What the DNS check saw of a name reaches the routes that forward to it: their clusters
    # (refused or not) and their DNSResolved condition.
    for name in observed:
        reached.update(routes.hostname_readers(name))
    for kind, name in ROUTE_FIELDS.items():
        reached.update(ObjectKey(kind, *key) for key in changes.get(name, ()))
    if "services" in changes:
        reached.update(routes.readers_of_all)
        for key in changes["services"]:
            reached.update(routes.readers(key))
    if "reference_grants" in changes:
        reached.update(_grant_readers(routes, before, after, changes["reference_grants"]))
    if changes.keys() & {"backend_tls_policies", "config_maps", "secrets"} and with_names:
        # Policies (and the CA certificates they name) shape the clusters of the Services
        # they target: every route reading one of those, before or after.
        for policy in (*before.backend_tls_policies.values(), *after.backend_tls_policies.values()):
            for ref in policy.target_refs:
                reached.update(routes.readers((policy.meta.namespace, ref.name)))
    return reached


def _grant_readers(
    routes: RouteIndex, before: Store, after: Store, changed: frozenset[NamespacedName]
) -> Iterator[ObjectKey]:
    """Routes with a question one of the changed grants permits, before or after: a grant
    only adds permissions, so no other answer can change."""
    versions = [
        grant
        for key in changed
        for grant in (before.reference_grants.get(key), after.reference_grants.get(key))
        if grant is not None
    ]
    changed_grants = ReferenceGrants(versions)
    entries = routes.entries
    for namespace in {namespace for namespace, _ in changed}:
        for route in routes.grant_readers(namespace):
            questions = entries[route].grant_questions
            if any(changed_grants.permits(r, t) for r, t in questions):
                yield route


def certificates_alone_differ(before: Frontends, after: Frontends) -> bool:
    """Whether the verdicts differ at most in their listeners' certificates (not in whether a
    listener has any): then only the HTTPS listeners change, no route."""
    return _without_certificates(before) == _without_certificates(after)


def _without_certificates(judged: Frontends) -> Frontends:
    """The verdicts with each listener's certificates reduced to whether it has any."""
    return dataclasses.replace(
        judged,
        gateways={
            key: dataclasses.replace(
                verdict,
                listeners=tuple(
                    dataclasses.replace(v, certificates=_SOME if v.certificates else ())
                    for v in verdict.listeners
                ),
            )
            for key, verdict in judged.gateways.items()
        },
    )


# What a listener's certificates become in _without_certificates when it has some.
_SOME: tuple = (None,)  # (not a certificate: a mark that there are some)
