"""The DNS check: dragoman resolves the external names routes forward to, itself, with
bounded timeouts, and re-checks each when its answer's TTL runs out (kept within a minimum
and a maximum interval). The addresses it accepted are the only ones Envoy connects to: a
change in them is pushed as endpoints only (the EDS fast path). An answer the policy refuses
for a name accepted before (DNS rebinding) keeps the last accepted addresses for a grace,
then none.

This is the I/O shell: what the results mean (refusing denied addresses, the DNSResolved
condition) is decided by the pure build, which takes the observations as an input.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.rdatatype
import dns.resolver

from dragoman.dag.dns_check import (
    NO_ANSWER,
    NXDOMAIN,
    SERVFAIL,
    TIMEOUT,
    DnsObservation,
    DnsObservations,
)
from dragoman.dag.external_name_policy import NO_POLICY, ExternalNamePolicy
from dragoman.runtime.controller import Controller, UpdateResult
from dragoman.runtime.server_config import DnsCheckSettings

log = logging.getLogger("dragoman.dns")

# Names resolved at once; more wait their turn, so a burst never floods the resolver.
MAX_CONCURRENT = 16
# How often the loop looks for names added by a rebuild (a new route or Service).
POLL_S = 1.0


@dataclass(frozen=True, slots=True)
class Resolution:
    """One attempt at resolving a name, both families."""

    addresses: tuple[str, ...] = ()
    ttl: float | None = None  # of the answers, the shortest; None when nothing was found
    error: str | None = None  # NXDOMAIN, NoAnswer, Timeout or SERVFAIL


Resolve = Callable[[str], Awaitable[Resolution]]


@dataclass(frozen=True, slots=True)
class AcceptedAnswer:
    """The last answer for a name that passed the policy: what a restart may serve again
    while it is younger than its grace."""

    addresses: tuple[str, ...]
    interval: float  # until it was due again (its TTL, clamped): the default grace
    accepted_at: float  # wall-clock time (seconds since the epoch) it was last accepted


class DnsResolver:
    """A and AAAA lookups of absolute names through dnspython, never the search list."""

    def __init__(self, settings: DnsCheckSettings) -> None:
        resolver = dns.asyncresolver.Resolver(configure=not settings.resolvers)
        if settings.resolvers:
            resolver.nameservers = [
                dns.nameserver.Do53Nameserver(address, port) for address, port in settings.resolvers
            ]
        resolver.timeout = settings.timeout_s
        resolver.lifetime = settings.timeout_s
        resolver.cache = None  # every check asks afresh; the TTL decides when to ask again
        self._resolver = resolver

    async def __call__(self, name: str) -> Resolution:
        answers = await asyncio.gather(
            self._query(name, dns.rdatatype.A), self._query(name, dns.rdatatype.AAAA)
        )
        addresses = sorted(
            {address for found, _, _ in answers for address in found}, key=_address_order
        )
        if addresses:
            ttls = [ttl for found, ttl, _ in answers if found and ttl is not None]
            return Resolution(tuple(addresses), min(ttls) if ttls else None)
        errors = [error for _, _, error in answers if error is not None]
        for error in (NXDOMAIN, TIMEOUT, SERVFAIL):
            if error in errors:
                return Resolution(error=error)
        return Resolution(error=NO_ANSWER)

    async def _query(
        self, name: str, rdtype: dns.rdatatype.RdataType
    ) -> tuple[list[str], float | None, str | None]:
        absolute = name.rstrip(".") + "."
        try:
            answer = await self._resolver.resolve(
                absolute, rdtype, search=False, raise_on_no_answer=False
            )
        except dns.resolver.NXDOMAIN:
            return [], None, NXDOMAIN
        except dns.exception.Timeout:
            return [], None, TIMEOUT
        except dns.resolver.NoNameservers:
            return [], None, SERVFAIL
        except dns.exception.DNSException as error:
            log.debug("DNS check of %s (%s) failed: %s", name, rdtype.name, error)
            return [], None, SERVFAIL
        if answer.rrset is None:
            return [], None, None
        return [item.to_text() for item in answer.rrset], float(answer.rrset.ttl), None


class DnsChecker:
    """The latest observation of each name, and when each is due again."""

    def __init__(
        self,
        settings: DnsCheckSettings,
        resolve: Resolve | None = None,
        clock: Callable[[], float] = time.monotonic,
        policy: ExternalNamePolicy = NO_POLICY,
        on_round: Callable[[float], None] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._resolve = resolve or DnsResolver(settings)
        self._clock = clock
        self._wall_clock = wall_clock
        self._policy = policy
        # Told how long each round that resolved something took (metrics).
        self.on_round = on_round
        self._observations: dict[str, DnsObservation] = {}
        self._due: dict[str, float] = {}
        # Per name: the last answer the policy accepted and its interval (the default grace),
        # and when the grace of a refused answer ends.
        self._accepted: dict[str, tuple[tuple[str, ...], float]] = {}
        self._accepted_at: dict[str, float] = {}  # wall clock
        self._grace_end: dict[str, float] = {}

    def restore(self, answers: Mapping[str, AcceptedAnswer]) -> None:
        """Answers a previous process accepted: served (as after a good answer) until this
        one's own checks say otherwise; each name is checked at once."""
        self._observations.update(restored_observations(answers))
        for name, answer in answers.items():
            self._accepted[name] = (answer.addresses, answer.interval)
            self._accepted_at[name] = answer.accepted_at

    def accepted_answers(self) -> dict[str, AcceptedAnswer]:
        """The last accepted answer of each name checked."""
        return {
            name: AcceptedAnswer(addresses, interval, self._accepted_at[name])
            for name, (addresses, interval) in self._accepted.items()
        }

    @property
    def observations(self) -> DnsObservations:
        return dict(self._observations)

    def seconds_until_due(self) -> float | None:
        """Until the next name is due; None when there is none."""
        due = min(self._due.values(), default=None)
        return None if due is None else max(0.0, due - self._clock())

    async def check(self, names: Iterable[str]) -> list[str]:
        """Resolve the names that are due (new ones at once); forget names no longer asked
        for. Returns the names whose observation changed."""
        wanted = set(names)
        for gone in (self._due.keys() | self._observations.keys()) - wanted:
            self._due.pop(gone, None)
            self._observations.pop(gone, None)
            self._accepted.pop(gone, None)
            self._accepted_at.pop(gone, None)
            self._grace_end.pop(gone, None)
        now = self._clock()
        due = sorted(name for name in wanted if self._due.get(name, now) <= now)
        if not due:
            return []
        started = time.perf_counter()
        limit = asyncio.Semaphore(MAX_CONCURRENT)

        async def one(name: str) -> Resolution:
            async with limit:
                try:
                    return await self._resolve(name)
                except Exception:  # a resolver bug must not end the checks
                    log.exception("DNS check of %s failed", name)
                    return Resolution(error=SERVFAIL)

        results = await asyncio.gather(*(one(name) for name in due))
        if self.on_round is not None:
            self.on_round(time.perf_counter() - started)
        changed = []
        now = self._clock()
        for name, result in zip(due, results, strict=True):
            before = self._observations.get(name)
            after = self._judged(name, _observed(before, result), self._interval(result), now)
            self._observations[name] = after
            due_at = now + self._interval(result)
            if after.kept:  # look again when the grace ends, to stop serving what it kept
                due_at = min(due_at, self._grace_end[name])
            self._due[name] = due_at
            if after != before:
                changed.append(name)
        return changed

    def _judged(
        self, name: str, observed: DnsObservation, interval: float, now: float
    ) -> DnsObservation:
        """The observation with what the grace keeps, once an answer for a name accepted
        before is refused by the policy."""
        addresses = observed.addresses
        if addresses and self._policy.address_refusal(name, addresses) is None:
            if observed.error is None:
                self._accepted[name] = (addresses, interval)
                self._accepted_at[name] = self._wall_clock()
            self._grace_end.pop(name, None)
            return observed
        accepted = self._accepted.get(name)
        if accepted is None:
            return observed  # never accepted: the build refuses the name outright
        grace = self.settings.grace_s if self.settings.grace_s is not None else accepted[1]
        end = self._grace_end.setdefault(name, now + grace)
        return dataclasses.replace(observed, kept=accepted[0] if now < end else ())

    def _interval(self, result: Resolution) -> float:
        settings = self.settings
        if result.error is not None or result.ttl is None:
            return settings.min_interval_s
        return min(max(result.ttl, settings.min_interval_s), settings.max_interval_s)


def restored_observations(answers: Mapping[str, AcceptedAnswer]) -> DnsObservations:
    """What a restarted process builds with before its own checks: each kept answer as a
    good answer."""
    return {name: DnsObservation(addresses=answer.addresses) for name, answer in answers.items()}


def _observed(before: DnsObservation | None, result: Resolution) -> DnsObservation:
    if result.error is None:
        return DnsObservation(addresses=result.addresses)
    # Keep the last addresses that passed: a resolver outage must not look like a new answer.
    kept = before.addresses if before is not None else ()
    return DnsObservation(addresses=kept, error=result.error)


def _addresses_of(
    answers: Mapping[str, AcceptedAnswer],
) -> dict[str, tuple[tuple[str, ...], float]]:
    return {name: (answer.addresses, answer.interval) for name, answer in answers.items()}


def _address_order(text: str) -> tuple[int, int]:
    address = ipaddress.ip_address(text)
    return address.version, int(address)


def describe(name: str, observation: DnsObservation | None) -> str:
    if observation is None:
        return f"{name}: not checked"
    if observation.kept is not None:
        kept = ", ".join(observation.kept) if observation.kept else "nothing (grace over)"
        answer = observation.error or ", ".join(observation.addresses)
        return f"{name}: {answer} refused; serving {kept}"
    if observation.error is None:
        return f"{name}: {', '.join(observation.addresses)}"
    return f"{name}: {observation.error}"


class DnsCheckLoop:
    """Runs the checker for a controller: the names come from its latest DAG; a change in
    what they resolve to rebuilds it (and `on_update` hears of the rebuild)."""

    def __init__(
        self,
        controller: Controller,
        checker: DnsChecker,
        on_update: Callable[[UpdateResult], None] | None = None,
        on_answers: Callable[[Mapping[str, AcceptedAnswer]], None] | None = None,
    ) -> None:
        self.controller = controller
        self.checker = checker
        self._on_update = on_update
        # Told the accepted answers when they change, and when they were accepted again
        # (at most every minInterval): kept for the next process. Called in a thread, as it
        # writes to disk.
        self._on_answers = on_answers
        self._told: dict[str, AcceptedAnswer] = {}
        self._told_at = float("-inf")

    def names(self) -> Sequence[str]:
        dag = self.controller.dag
        return dag.dns_hostnames if dag is not None else ()

    async def check_once(self) -> UpdateResult | None:
        """Check what is due; rebuild when something changed. None: nothing changed."""
        changed = await self.checker.check(self.names())
        await self._tell_answers()
        if not changed:
            return None
        observations = self.checker.observations
        for name in changed:
            observation = observations.get(name)
            healthy = observation and observation.error is None and observation.kept is None
            level = logging.INFO if healthy else logging.WARNING
            log.log(level, "DNS check: %s", describe(name, observation))
        result = self.controller.update_dns(observations)
        if self._on_update is not None:
            self._on_update(result)
        return result

    async def _tell_answers(self) -> None:
        if self._on_answers is None:
            return
        answers = self.checker.accepted_answers()
        if answers == self._told:
            return
        same = _addresses_of(answers) == _addresses_of(self._told)
        if same and time.monotonic() - self._told_at < self.checker.settings.min_interval_s:
            return  # only accepted again: told now and then, not on every check
        try:
            await asyncio.to_thread(self._on_answers, answers)
        except Exception:  # keeping them is a help for the next process, never a need
            log.exception("cannot keep the DNS check's answers")
        self._told, self._told_at = answers, time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.check_once()
            except Exception:  # keep checking; the last configuration stays served
                log.exception("DNS check round failed")
            due = self.checker.seconds_until_due()
            wait = POLL_S if due is None else min(POLL_S, due)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(wait, 0.05))
