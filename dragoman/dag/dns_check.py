"""The DNS check's results as an input of the build: whether an external name may be served
(it resolved, and every address passed the policy) and the `DNSResolved` route condition.

Pure: the resolving is done by dragoman.runtime.dns_checker, which hands its observations
to build().
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dragoman.dag.conditions import Condition, condition
from dragoman.dag.external_name_policy import ExternalNamePolicy

# Failures the checker reports, also the DNSResolved=False reasons.
NXDOMAIN = "NXDOMAIN"  # the name does not exist
NO_ANSWER = "NoAnswer"  # the name exists but has no A or AAAA record
TIMEOUT = "Timeout"  # no resolver answered in time
SERVFAIL = "SERVFAIL"  # the resolvers answered with a failure

# Problem reasons of a name the check refused or has not yet allowed.
DNS_CHECK_PENDING = "DNSCheckPending"
DNS_CHECK_FAILED = "DNSCheckFailed"
NOT_ALLOWED_BY_POLICY = "NotAllowedByPolicy"

DNS_RESOLVED = "DNSResolved"


@dataclass(frozen=True, slots=True)
class DnsObservation:
    """What the DNS check last learned about one name."""

    # From the last resolution that succeeded, sorted; kept while later attempts fail, so a
    # passing outage of the resolver does not take a checked name out of service.
    addresses: tuple[str, ...] = ()
    error: str | None = None  # the last attempt's failure (NXDOMAIN, ...); None: it resolved
    # Set by the checker once some answer for the name passed the policy and the latest did
    # not: the last accepted addresses while the grace lasts, () after it. None: no answer
    # was ever accepted (or the latest is accepted, and `addresses` are served).
    kept: tuple[str, ...] | None = None


DnsObservations = Mapping[str, DnsObservation]


@dataclass(frozen=True, slots=True)
class DnsRefusal:
    reason: str
    message: str


def dns_refusal(
    hostname: str,
    observation: DnsObservation | None,
    policy: ExternalNamePolicy,
    field: str = "externalName",
) -> DnsRefusal | None:
    """None when the check allows serving `hostname` (its cluster exists; `served_addresses`
    says where it sends), else why it does not (yet): pending, never resolved, or refused
    before any answer for it was accepted. Messages name the name's `field`."""
    if observation is None:
        return DnsRefusal(
            DNS_CHECK_PENDING,
            f"{field} {hostname!r} has not been resolved by the DNS check yet; it is "
            "served once it resolves to allowed addresses",
        )
    if observation.kept is not None:
        return None  # accepted once: the cluster stays, with what the grace keeps
    if not observation.addresses:
        return DnsRefusal(
            DNS_CHECK_FAILED,
            f"{field} {hostname!r} does not resolve ({observation.error or NO_ANSWER}); "
            "with the DNS check on, a name is served only once it resolves to allowed addresses",
        )
    refusal = policy.address_refusal(hostname, observation.addresses)
    if refusal is not None:
        return DnsRefusal(NOT_ALLOWED_BY_POLICY, refusal)
    return None


def served_addresses(
    hostname: str, observation: DnsObservation | None, policy: ExternalNamePolicy
) -> tuple[str, ...]:
    """The checked addresses Envoy may connect to for `hostname`: the latest answer when every
    address in it passed the policy, else what the grace keeps of the last accepted one (none
    after it: the backend answers 503, never a refused address)."""
    if observation is None:
        return ()
    if observation.addresses and policy.address_refusal(hostname, observation.addresses) is None:
        return observation.addresses
    return observation.kept or ()


def answer_refusal(
    hostname: str, observation: DnsObservation | None, policy: ExternalNamePolicy
) -> str | None:
    """Why the latest answer for a name accepted before is not served (None: it is)."""
    if observation is None or observation.kept is None:
        return None
    refusal = policy.address_refusal(hostname, observation.addresses)
    if refusal is not None:
        return refusal
    if not observation.addresses:
        return f"externalName {hostname!r} does not resolve ({observation.error or NO_ANSWER})"
    return None


def dns_resolved_condition(
    hostnames: Sequence[str],
    observations: DnsObservations,
    generation: int,
    policy: ExternalNamePolicy | None = None,
) -> Condition:
    """DNSResolved for a route forwarding to `hostnames`: True when every one resolved at the
    last attempt to addresses it may use, False naming the failures (DNSCheckFailed with the
    refused address, when an answer for a name accepted before is refused), Unknown while
    some have not been checked yet."""
    parts: list[str] = []
    failures: list[str] = []
    pending = False
    for hostname in hostnames:
        observation = observations.get(hostname)
        refused = answer_refusal(hostname, observation, policy) if policy is not None else None
        if observation is None:
            pending = True
            parts.append(f"{hostname}: not checked yet")
        elif refused is not None and observation.kept is not None:
            failures.append(DNS_CHECK_FAILED)
            still = (
                f"serving the last accepted addresses {', '.join(observation.kept)} "
                "until the grace ends"
                if observation.kept
                else "no address is served (the backend answers 503)"
            )
            parts.append(f"{hostname}: {refused}; {still}")
        elif observation.error is not None:
            failures.append(observation.error)
            stale = (
                f" (last resolved to {', '.join(observation.addresses)})"
                if observation.addresses
                else ""
            )
            parts.append(f"{hostname}: {observation.error}{stale}")
        else:
            parts.append(f"{hostname}: {', '.join(observation.addresses)}")
    message = "; ".join(parts)
    if failures:
        return condition(DNS_RESOLVED, False, failures[0], message, generation)
    if pending:
        return condition(DNS_RESOLVED, None, "Pending", message, generation)
    return condition(DNS_RESOLVED, True, "Resolved", message, generation)
