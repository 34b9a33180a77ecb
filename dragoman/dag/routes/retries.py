"""An HTTPRoute rule's `retry` (GEP-1731) to the retry policy its Envoy route carries."""

from __future__ import annotations

from dragoman.dag.model import Problem, Retry
from dragoman.objects import HTTPRoute, HTTPRouteRetry

# Retries when `attempts` is unset (the GEP leaves it to the implementation): Envoy's own
# default, the fewest that still retries.
DEFAULT_RETRY_ATTEMPTS = 1
# Envoy refuses a back-off base interval of 1 ms or less.
MIN_BACKOFF_MS = 2


def rule_retry(
    route: HTTPRoute, rule_index: int, retry: HTTPRouteRetry
) -> tuple[Retry, Problem | None]:
    """The rule's retry policy, and the problem with its `backoff` if Envoy cannot take it
    as written (then served with Envoy's shortest back-off)."""
    attempts = DEFAULT_RETRY_ATTEMPTS if retry.attempts is None else retry.attempts
    backoff = retry.backoff_ms
    problem = None
    if backoff is not None and backoff < MIN_BACKOFF_MS:
        problem = Problem(
            route.key,
            f"spec.rules[{rule_index}].retry.backoff",
            "UnsupportedValue",
            f"Envoy's shortest retry back-off is {MIN_BACKOFF_MS}ms, got {backoff}ms: "
            f"retries wait up to {MIN_BACKOFF_MS}ms",
        )
        backoff = MIN_BACKOFF_MS
    return Retry(attempts=attempts, codes=retry.codes, backoff_ms=backoff), problem
