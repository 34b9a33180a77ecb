"""Short, readable descriptions of what the kubernetes client raises."""

from __future__ import annotations

import json


def describe_error(error: BaseException) -> str:
    """One line: the API's own message for an ApiException; the underlying cause for
    urllib3's MaxRetryError (which otherwise repeats the whole URL)."""
    status = getattr(error, "status", None)
    body = getattr(error, "body", None)
    if isinstance(status, int) and status:
        try:
            message = json.loads(body).get("message") if body else None
        except (TypeError, ValueError, AttributeError):
            message = None
        return f"HTTP {status} {message or getattr(error, 'reason', '')}".strip()
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        error = reason
    text = str(error) or type(error).__name__
    return text if text == type(error).__name__ else f"{type(error).__name__}: {text}"
