"""The DNS check's results as an input of the build: whether an external name may be served
(it resolved, and every address passed the policy) and the `DNSResolved` route condition.

Pure: the resolving is done by dragoman.runtime.dns_checker, which hands its observations
to build().
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dragoman.dag.conditions import Condition, condition
from dragoman.dag.upstreams.external_name_policy import ExternalNamePolicy

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


DnsObservations = Mapping[str, DnsObservation]


@dataclass(frozen=True, slots=True)
class DnsRefusal:
    reason: str
    message: str


def dns_refusal(
    hostname: str, observation: DnsObservation | None, policy: ExternalNamePolicy
) -> DnsRefusal | None:
    """None when the check allows serving `hostname`, else why it does not (yet)."""
    if observation is None:
        return DnsRefusal(
            DNS_CHECK_PENDING,
            f"externalName {hostname!r} has not been resolved by the DNS check yet; it is "
            "served once it resolves to allowed addresses",
        )
    if not observation.addresses:
        return DnsRefusal(
            DNS_CHECK_FAILED,
            f"externalName {hostname!r} does not resolve ({observation.error or NO_ANSWER}); "
            "with the DNS check on, a name is served only once it resolves to allowed addresses",
        )
    refusal = policy.address_refusal(hostname, observation.addresses)
    if refusal is not None:
        return DnsRefusal(NOT_ALLOWED_BY_POLICY, refusal)
    return None


def dns_resolved_condition(
    hostnames: Sequence[str], observations: DnsObservations, generation: int
) -> Condition:
    """DNSResolved for a route forwarding to `hostnames`: True when every one resolved at the
    last attempt, False naming the failures, Unknown while some have not been checked yet."""
    parts: list[str] = []
    failures: list[str] = []
    pending = False
    for hostname in hostnames:
        observation = observations.get(hostname)
        if observation is None:
            pending = True
            parts.append(f"{hostname}: not checked yet")
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
