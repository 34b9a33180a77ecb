"""An HTTPRoute rule's `retry` (GEP-1731) to the retry policy its Envoy route carries."""

from __future__ import annotations

from dragoman.dag.model import Retry
from dragoman.objects import HTTPRouteRetry

# Retries when `attempts` is unset (the GEP leaves it to the implementation): Envoy's own
# default, the fewest that still retries.
DEFAULT_RETRY_ATTEMPTS = 1
# Envoy's back-off base interval must be above zero. Its wait is random up to the interval,
# so 1 ms serves `backoff: 0s` (no minimum wait) as written.
MIN_BACKOFF_MS = 1


def rule_retry(retry: HTTPRouteRetry) -> Retry:
    attempts = DEFAULT_RETRY_ATTEMPTS if retry.attempts is None else retry.attempts
    backoff = retry.backoff_ms
    if backoff is not None:
        backoff = max(backoff, MIN_BACKOFF_MS)
    return Retry(attempts=attempts, codes=retry.codes, backoff_ms=backoff)
