"""API errors and the `Status` objects the server answers with."""

from __future__ import annotations

from typing import Any

from tests.support.kubeapi.resources import ResourceType

# The reason the real server gives for each status code it can send on its own.
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A failure the server reports as a `Status` object with an HTTP status code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after_seconds = retry_after_seconds

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details = dict(self.details or {})
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        if details:
            status["details"] = details
        return status


def _details(rtype: ResourceType, name: str) -> dict[str, Any]:
    # The server puts the resource (not the kind) in details.kind for these errors.
    details: dict[str, Any] = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return details


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rtype.key} "{name}" not found', _details(rtype, name))


def already_exists(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{rtype.key} "{name}" already exists', _details(rtype, name)
    )


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rtype.key} "{name}": {why}',
        _details(rtype, name),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(rtype: ResourceType, name: str, field: str, problem: str, kind: str) -> ApiError:
    """422 with one cause; `kind` is the cause type, e.g. FieldValueRequired."""
    details: dict[str, Any] = {
        "name": name,
        "kind": rtype.kind,
        "causes": [{"reason": kind, "message": problem, "field": field}],
    }
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(
        422, "Invalid", f'{rtype.kind} "{name}" is invalid: {field}: {problem}', details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large_resource_version(requested: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ]
        },
        retry_after_seconds=1,
    )


def injected(code: int, message: str | None = None) -> ApiError:
    """An error a test asked for; 429 carries Retry-After: 1, as the server's throttling does."""
    reason = REASONS.get(code, "InternalError" if code >= 500 else "BadRequest")
    retry_after = 1 if code == 429 else None
    return ApiError(code, reason, message or f"injected {code} {reason}", None, retry_after)


def success(rtype: ResourceType, name: str, uid: str) -> dict[str, Any]:
    """The `Status` a delete answers with when the resource does not return the object."""
    details = _details(rtype, name)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
