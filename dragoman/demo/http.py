"""Small HTTP and polling helpers for the end-to-end tests and the demo's self-check."""

from __future__ import annotations

import http.client
import time
import urllib.parse
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def http_get(
    url: str, *, host: str | None = None, timeout: float = 2.0
) -> tuple[int, dict[str, str], bytes]:
    """GET `url` on a fresh connection: (status, headers with lowercase names, body).

    `host` overrides the Host header, to pick a virtual host on a listener
    reached by address. Repeated headers are joined with ", ".
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        raise ValueError(f"only plain http:// URLs are supported, got {url!r}")
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    try:
        request_headers = {"Host": host} if host is not None else {}
        connection.request("GET", path, headers=request_headers)
        response = connection.getresponse()
        body = response.read()
        headers: dict[str, str] = {}
        for key, value in response.getheaders():
            name = key.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return response.status, headers, body
    finally:
        connection.close()


def wait_until(
    fn: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.1,
    *,
    fatal: tuple[type[BaseException], ...] = (),
) -> T:
    """Call `fn` until it returns a truthy value, and return that value.

    Exceptions from `fn` count as "not yet", except those of the `fatal`
    types, which propagate at once. After `timeout` seconds a TimeoutError
    names the last exception (chained) or the last value.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    last_value: object = None
    attempts = 0
    while True:
        attempts += 1
        try:
            value = fn()
        except fatal:
            raise
        except Exception as error:  # any failure just means "try again"
            last_error = error
        else:
            if value:
                return value
            last_error = None
            last_value = value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    if last_error is not None:
        raise TimeoutError(
            f"not done after {timeout} s ({attempts} attempts); last error: {last_error!r}"
        ) from last_error
    raise TimeoutError(
        f"not done after {timeout} s ({attempts} attempts); last value: {last_value!r}"
    )
