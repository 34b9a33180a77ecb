"""An authoritative DNS responder on loopback for the end-to-end tests and the demo.

Envoy's c-ares resolver is pointed at it, so names used by ExternalName
Services resolve to loopback backends that a test can move at runtime. It
answers A and AAAA over UDP and TCP on one port: c-ares waits 5 s before it
retries a lost UDP reply, so tests that resolve many names at once set
`use_tcp_for_dns_lookups` and rely on the TCP side.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, cast

import dns.exception
import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

_CLASSIC_UDP_SIZE = 512  # the limit for a UDP reply when the query carries no EDNS
_TCP_MESSAGE_LIMIT = 65535  # a two-byte length prefix bounds a TCP message
_TCP_IDLE_SECONDS = 30.0  # c-ares reconnects after an idle close; this bounds each connection
_UDP_RECEIVE_BUFFER = 1 << 20  # room for bursts of queries while the loop is busy
_BIND_ATTEMPTS = 20  # port 0: retries when the UDP side of a free TCP port is taken
_THREAD_TIMEOUT_SECONDS = 5.0


def normalize_name(name: str) -> str:
    """The key a name is stored and counted under: lowercase, no trailing dot."""
    return name.strip().rstrip(".").lower()


class DnsRecords:
    """A thread-safe table of A/AAAA records with per-name query counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, dict[dns.rdatatype.RdataType, tuple[str, ...]]] = {}
        self._query_counts: Counter[tuple[str, str]] = Counter()

    def set(self, name: str, rdtype: dns.rdatatype.RdataType, addresses: tuple[str, ...]) -> None:
        """Replace one type's records for a name; other types stay as they are."""
        with self._lock:
            self._records.setdefault(normalize_name(name), {})[rdtype] = addresses

    def remove(self, name: str) -> bool:
        """Forget a name entirely (it answers NXDOMAIN again); True if it was known."""
        with self._lock:
            return self._records.pop(normalize_name(name), None) is not None

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._records)

    def lookup(self, name: str, rdtype: dns.rdatatype.RdataType) -> tuple[str, ...] | None:
        """Addresses of one type (possibly none), or None when the name is unknown.

        Every lookup counts as one query for the name and type.
        """
        key = normalize_name(name)
        with self._lock:
            self._query_counts[(key, dns.rdatatype.to_text(rdtype))] += 1
            by_type = self._records.get(key)
            if by_type is None:
                return None
            return by_type.get(rdtype, ())

    def query_count(self, name: str, rdtype: str | None = None) -> int:
        """Queries seen for a name, of one type ("A", "AAAA", ...) or of all types."""
        key = normalize_name(name)
        with self._lock:
            if rdtype is not None:
                return self._query_counts[(key, rdtype.upper())]
            return sum(n for (qname, _), n in self._query_counts.items() if qname == key)

    def total_queries(self) -> int:
        with self._lock:
            return sum(self._query_counts.values())

    def reset_counts(self) -> None:
        with self._lock:
            self._query_counts.clear()


def build_response(wire: bytes, records: DnsRecords, ttl: int, *, over_udp: bool) -> bytes | None:
    """The reply to one DNS message, or None when it must be ignored.

    Malformed messages and responses are ignored, as a real server would.
    A UDP reply larger than the client accepts is sent truncated (TC), so
    that the client asks again over TCP.
    """
    try:
        query = dns.message.from_wire(wire)
    except Exception:  # dnspython raises assorted types for hostile input; all mean "drop"
        return None
    if query.flags & dns.flags.QR:
        return None
    response = dns.message.make_response(query)
    response.flags |= dns.flags.AA
    if query.opcode() != dns.opcode.QUERY:
        response.set_rcode(dns.rcode.NOTIMP)
    elif len(query.question) != 1:
        response.set_rcode(dns.rcode.FORMERR)
    else:
        question = query.question[0]
        if question.rdclass != dns.rdataclass.IN:
            response.set_rcode(dns.rcode.REFUSED)
        else:
            addresses = records.lookup(question.name.to_text(), question.rdtype)
            if addresses is None:
                response.set_rcode(dns.rcode.NXDOMAIN)
            elif addresses:
                # The owner name keeps the query's spelling, for resolvers that randomize case.
                response.answer.append(
                    dns.rrset.from_text_list(
                        question.name, ttl, dns.rdataclass.IN, question.rdtype, list(addresses)
                    )
                )
    max_size = _udp_reply_limit(query) if over_udp else _TCP_MESSAGE_LIMIT
    try:
        return response.to_wire(max_size=max_size)
    except dns.exception.TooBig:
        response.answer.clear()
        response.flags |= dns.flags.TC
        return response.to_wire(max_size=max_size)


def _udp_reply_limit(query: dns.message.Message) -> int:
    """The largest UDP reply the sender accepts: its EDNS payload size, else 512."""
    if query.edns < 0:
        return _CLASSIC_UDP_SIZE
    return max(_CLASSIC_UDP_SIZE, min(query.payload, _TCP_MESSAGE_LIMIT))


class _UdpProtocol(asyncio.DatagramProtocol):
    """Answers each datagram as it arrives; nothing is queued behind a slow client."""

    def __init__(self, answer: Callable[[bytes], bytes | None]) -> None:
        self._answer = answer
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # The selector loop's datagram transport does not subclass DatagramTransport.
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        reply = self._answer(data)
        if reply is not None and self._transport is not None:
            self._transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:
        # ICMP errors from clients that went away are not the responder's problem.
        pass


class DnsResponder:
    """Answers A/AAAA queries for names set at runtime, over UDP and TCP on one port.

    Unknown names get NXDOMAIN; a known name without records of the asked
    type gets NOERROR with no answer, so a resolver that asks both families
    (V4_PREFERRED asks A first, AUTO asks AAAA first) falls through to the
    other. Names are matched case-insensitively, with or without a
    trailing dot. Negative answers carry no SOA, so resolvers do not cache
    them and a name added later is found at once.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, ttl: int = 1) -> None:
        self._host = host
        self._requested_port = port
        self._port = port
        self._ttl = 1
        self.ttl = ttl  # validated by the setter
        self.records = DnsRecords()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._sockets: list[socket.socket] = []
        self._tcp_tasks: set[asyncio.Task[Any]] = set()
        self._startup_error: BaseException | None = None
        self._transport_lock = threading.Lock()
        self._messages_by_transport: Counter[str] = Counter()

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The bound port (UDP and TCP); known once started."""
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        return (self._host, self._port)

    @property
    def ttl(self) -> int:
        return self._ttl

    @ttl.setter
    def ttl(self, seconds: int) -> None:
        if seconds < 0:
            raise ValueError(f"TTL must not be negative, got {seconds}")
        self._ttl = seconds

    def set_a(self, name: str, *ipv4s: str) -> None:
        """Answer A queries for `name` with these addresses (none: empty NOERROR)."""
        self.records.set(name, dns.rdatatype.A, _addresses(ipaddress.IPv4Address, ipv4s))

    def set_aaaa(self, name: str, *ipv6s: str) -> None:
        """Answer AAAA queries for `name` with these addresses (none: empty NOERROR)."""
        self.records.set(name, dns.rdatatype.AAAA, _addresses(ipaddress.IPv6Address, ipv6s))

    def remove(self, name: str) -> bool:
        """Forget `name` so that it answers NXDOMAIN; True if it was known."""
        return self.records.remove(name)

    def query_count(self, name: str, rdtype: str | None = None) -> int:
        """Queries received for `name` (of one type, or all), over UDP and TCP."""
        return self.records.query_count(name, rdtype)

    @property
    def udp_messages(self) -> int:
        """Messages received over UDP, malformed ones included."""
        with self._transport_lock:
            return self._messages_by_transport["udp"]

    @property
    def tcp_messages(self) -> int:
        """Messages received over TCP, malformed ones included."""
        with self._transport_lock:
            return self._messages_by_transport["tcp"]

    def reset_counts(self) -> None:
        self.records.reset_counts()
        with self._transport_lock:
            self._messages_by_transport.clear()

    def _answer(self, wire: bytes, *, over_udp: bool) -> bytes | None:
        """The reply the sockets send for one received message."""
        with self._transport_lock:
            self._messages_by_transport["udp" if over_udp else "tcp"] += 1
        return build_response(wire, self.records, self._ttl, over_udp=over_udp)

    def start(self) -> Self:
        """Bind both sockets and serve from a background thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("DnsResponder already started")
        udp, tcp = self._bind()
        self._sockets = [udp, tcp]
        self._loop = asyncio.new_event_loop()
        self._stopping = asyncio.Event()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=(udp, tcp, ready),
            name=f"dns-responder-{self._port}",
            daemon=True,
        )
        self._thread.start()
        if not ready.wait(_THREAD_TIMEOUT_SECONDS) or self._startup_error is not None:
            self.stop()
            raise RuntimeError("DNS responder failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        """Stop serving, close every connection and release the port. Idempotent."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is not None and loop is not None and stopping is not None:
            if thread.is_alive():
                # The loop may have closed on its own between the check and the call.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(stopping.set)
            thread.join(_THREAD_TIMEOUT_SECONDS)
        for sock in self._sockets:
            sock.close()
        self._sockets = []
        self._thread = None
        self._loop = None
        self._stopping = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _bind(self) -> tuple[socket.socket, socket.socket]:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        for _ in range(_BIND_ATTEMPTS):
            tcp = socket.socket(family, socket.SOCK_STREAM)
            udp = socket.socket(family, socket.SOCK_DGRAM)
            try:
                # TCP only: a restart may rebind a port with connections in TIME_WAIT.
                tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                tcp.bind((self._host, self._requested_port))
                port = tcp.getsockname()[1]
                udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _UDP_RECEIVE_BUFFER)
                udp.bind((self._host, port))
                tcp.listen(128)
            except OSError:
                tcp.close()
                udp.close()
                if self._requested_port != 0:
                    raise
                continue
            tcp.setblocking(False)
            udp.setblocking(False)
            self._port = port
            return udp, tcp
        raise OSError(f"no port on {self._host} is free for both UDP and TCP")

    def _run(self, udp: socket.socket, tcp: socket.socket, ready: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(udp, tcp, ready))
        except BaseException as error:  # reported to start() rather than lost in the thread
            self._startup_error = error
            ready.set()
        finally:
            loop.close()

    async def _serve(self, udp: socket.socket, tcp: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        stopping = self._stopping
        assert stopping is not None
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _UdpProtocol(lambda wire: self._answer(wire, over_udp=True)), sock=udp
        )
        server = await asyncio.start_server(self._serve_tcp_connection, sock=tcp)
        ready.set()
        try:
            await stopping.wait()
        finally:
            server.close()
            transport.close()
            for task in list(self._tcp_tasks):
                task.cancel()
            await asyncio.gather(*self._tcp_tasks, return_exceptions=True)
            await server.wait_closed()

    async def _serve_tcp_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Length-prefixed queries, several per connection, answered in order."""
        task = asyncio.current_task()
        assert task is not None
        self._tcp_tasks.add(task)
        try:
            while True:
                prefix = await asyncio.wait_for(reader.readexactly(2), _TCP_IDLE_SECONDS)
                wire = await asyncio.wait_for(
                    reader.readexactly(int.from_bytes(prefix, "big")), _TCP_IDLE_SECONDS
                )
                reply = self._answer(wire, over_udp=False)
                if reply is None:
                    continue
                writer.write(len(reply).to_bytes(2, "big") + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass  # the client hung up, or went quiet for too long
        finally:
            self._tcp_tasks.discard(task)
            writer.close()


def _addresses(
    kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address], values: tuple[str, ...]
) -> tuple[str, ...]:
    """Validated, normalized address text; a bad address fails here, not in a reply."""
    return tuple(str(kind(value)) for value in values)
