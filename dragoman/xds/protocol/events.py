"""What a stream state machine tells its shell, SotW and delta alike: requests the protocol
forbids (errors), and what the client answered (ACKs, NACKs, requests answering an older
response)."""

from __future__ import annotations

from dataclasses import dataclass


class StreamError(Exception):
    """A request the protocol forbids; the shell ends the stream with INVALID_ARGUMENT."""


class MissingTypeUrl(StreamError):
    """An ADS request without type_url: nothing says which sub-stream it belongs to."""


class WrongTypeUrl(StreamError):
    """A request on a single-type stream naming another type."""


@dataclass(frozen=True, slots=True)
class Nack:
    """The client rejected a response."""

    type_url: str
    version: str  # the version_info of the rejected response
    nonce: str
    message: str  # error_detail.message, the client's reason
    code: int  # error_detail.code, a google.rpc.Code
    resource_names: tuple[str, ...]  # what the rejected response carried
    kept_version: str  # the version the client keeps running (its request's version_info)


@dataclass(frozen=True, slots=True)
class Ack:
    type_url: str
    version: str
    nonce: str


@dataclass(frozen=True, slots=True)
class StaleRequest:
    """A request answering an older response: ignored, the client will answer the latest one."""

    type_url: str
    nonce: str
    expected_nonce: str
    error_message: str = ""  # set when the stale request was a NACK


StreamEvent = Nack | Ack | StaleRequest
