"""A stream's reads and writes: requests read into a mailbox at a bounded rate, responses
written with a bound on how long the client may leave a write pending."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

import grpc

from dragoman.xds.protocol.request_mailbox import RequestMailbox
from dragoman.xds.protocol.wire import Response
from dragoman.xds.server.pacing import TokenBucket

logger = logging.getLogger("dragoman.xds")


class RequestReader:
    """Reads a stream's requests into `mailbox` (merged there), at most `rate` per second
    after a burst: beyond, the client waits on gRPC flow control. `arrived` is called when
    a request arrives or the client's side ends (`ended`)."""

    def __init__(
        self, context: grpc.aio.ServicerContext, rate: float, arrived: Callable[[], None]
    ) -> None:
        self.mailbox = RequestMailbox()
        self.arrived = arrived
        self.ended = False
        self._bucket = TokenBucket(max(1, round(rate)), rate)
        self.task = asyncio.create_task(self._run(context), name="dragoman-xds-read")

    async def _run(self, context: grpc.aio.ServicerContext) -> None:
        try:
            while True:
                if not self._bucket.take():
                    await asyncio.sleep(self._bucket.delay())
                    self._bucket.take()
                # context.read(), not the request iterator, whose generator holds on to the
                # last request while it waits for the next (a SotW EDS request names every
                # CLA); the mailbox lets go of a request once it is answered.
                message = await context.read()
                if message is grpc.aio.EOF:
                    return
                self.mailbox.put(message)
                self.arrived()
        except Exception as error:  # the stream was reset or cancelled
            logger.debug("xDS stream read ended: %r", error)
        finally:
            self.ended = True
            self.arrived()


class WriteStalled(Exception):
    """A write the client did not take within the stall timeout."""


class ClientGone(Exception):
    """A write failed: the client closed the stream or went away."""


class Writes:
    """Writes responses, each with a bound on how long the client may leave it pending: one
    timer for every stream's writes fails those pending longer than `timeout_s` (between
    1 and 1.25 times it). A timer per write would cost a heap entry and a wait each: at
    10,000 streams one change makes 10,000 writes."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._pending: dict[asyncio.Future[None], float] = {}  # oldest first
        self._sweep: asyncio.TimerHandle | None = None

    async def write(
        self,
        context: grpc.aio.ServicerContext,
        response: Response,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Write `response`; WriteStalled if it is still pending after the timeout (the
        stream is then aborted, which frees what gRPC holds for it), ClientGone if the
        write failed. The write itself is never cancelled: gRPC owns its batch until it
        completes or the stream ends."""
        writing = loop.create_task(context.write(response))
        waiter = loop.create_future()
        writing.add_done_callback(functools.partial(_written, waiter))
        self._pending[waiter] = loop.time()
        if self._sweep is None:
            self._sweep = loop.call_later(self._timeout_s / 4, self._swept, loop)
        try:
            await waiter
        finally:
            del self._pending[waiter]
        error = writing.exception()
        if error is not None:
            raise ClientGone(_short(error)) from None

    def _swept(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweep = None
        due = loop.time() - self._timeout_s
        for waiter, since in list(self._pending.items()):
            if since > due:
                break
            if not waiter.done():
                waiter.set_exception(WriteStalled())
        if self._pending:
            self._sweep = loop.call_later(self._timeout_s / 4, self._swept, loop)


def _written(waiter: asyncio.Future[None], writing: asyncio.Future[None]) -> None:
    # A write pending when the stream ends (aborted, cancelled) fails: expected, not logged.
    _retrieve(writing)
    if not waiter.done():
        waiter.set_result(None)


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()


class ClientGoneInCore(logging.Filter):
    """On gRPC's own logger: a stream whose client went away while a response was still
    being written ends with gRPC failing to send the status (its batch of operations is
    refused: the write never completed), which gRPC logs as an error with a traceback. A
    client going away is normal: dragoman's own line says it disconnected; this becomes one
    debug line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or type(error).__name__ != "ExecuteBatchError":
            return True
        logger.debug("xDS stream ended with a write pending: %s", error)
        return False


def quiet_client_gone_in_core() -> None:
    """Put ClientGoneInCore on gRPC's logger, once."""
    core = logging.getLogger(GRPC_CORE_LOGGER)
    if not any(isinstance(f, ClientGoneInCore) for f in core.filters):
        core.addFilter(ClientGoneInCore())


# The logger grpcio's Cython layer reports a servicer's failed batches on.
GRPC_CORE_LOGGER = "grpc._cython.cygrpc"


def _short(error: BaseException) -> str:
    """An error of gRPC's in a few words (its text lists every operation of the batch)."""
    return type(error).__name__
