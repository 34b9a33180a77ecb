"""The loopback DNS responder, queried with dnspython over UDP and TCP."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import dns.flags
import dns.message
import dns.opcode
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from dragoman.demo.dns import DnsRecords, DnsResponder, build_response

Query = Callable[..., dns.message.Message]
TIMEOUT = 2.0


@pytest.fixture
def responder() -> Iterator[DnsResponder]:
    with DnsResponder(ttl=7) as server:
        yield server


def _udp(server: DnsResponder, name: str, rdtype: str) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    return dns.query.udp(query, server.host, port=server.port, timeout=TIMEOUT)


def _tcp(server: DnsResponder, name: str, rdtype: str) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    return dns.query.tcp(query, server.host, port=server.port, timeout=TIMEOUT)


TRANSPORTS = pytest.mark.parametrize("ask", [_udp, _tcp], ids=["udp", "tcp"])


def _deadline() -> float:
    """dns.query.receive_tcp takes an absolute wall-clock limit."""
    return time.time() + TIMEOUT


def _addresses(response: dns.message.Message) -> list[str]:
    return sorted(rdata.to_text() for rrset in response.answer for rdata in rrset)


@TRANSPORTS
def test_answers_a_records_authoritatively(responder: DnsResponder, ask: Query) -> None:
    responder.set_a("backend.demo.test", "127.0.0.2", "127.0.0.3")
    response = ask(responder, "backend.demo.test", "A")
    assert response.rcode() == dns.rcode.NOERROR
    assert response.flags & dns.flags.AA
    assert _addresses(response) == ["127.0.0.2", "127.0.0.3"]
    assert response.answer[0].ttl == 7


@TRANSPORTS
def test_answers_aaaa_records(responder: DnsResponder, ask: Query) -> None:
    responder.set_aaaa("v6.demo.test", "::1", "fd00:0:0::2")
    response = ask(responder, "v6.demo.test", "AAAA")
    assert response.rcode() == dns.rcode.NOERROR
    assert _addresses(response) == ["::1", "fd00::2"]


@TRANSPORTS
def test_unknown_name_is_nxdomain(responder: DnsResponder, ask: Query) -> None:
    responder.set_a("known.demo.test", "127.0.0.2")
    response = ask(responder, "unknown.demo.test", "A")
    assert response.rcode() == dns.rcode.NXDOMAIN
    assert response.answer == []


@TRANSPORTS
def test_known_name_without_that_type_is_empty_noerror(responder: DnsResponder, ask: Query) -> None:
    responder.set_a("v4only.demo.test", "127.0.0.2")
    response = ask(responder, "v4only.demo.test", "AAAA")
    assert response.rcode() == dns.rcode.NOERROR
    assert response.answer == []
    assert _addresses(ask(responder, "v4only.demo.test", "A")) == ["127.0.0.2"]


@TRANSPORTS
def test_names_are_case_insensitive_and_trailing_dot_tolerant(
    responder: DnsResponder, ask: Query
) -> None:
    responder.set_a("Mixed.Demo.TEST.", "127.0.0.4")
    response = ask(responder, "mixed.demo.test", "A")
    assert _addresses(response) == ["127.0.0.4"]
    response = ask(responder, "MIXED.demo.Test.", "A")
    assert _addresses(response) == ["127.0.0.4"]
    # The owner name keeps the asker's spelling (resolvers may randomize case).
    assert response.answer[0].name.to_text() == "MIXED.demo.Test."


def test_records_change_at_runtime(responder: DnsResponder) -> None:
    responder.set_a("moving.demo.test", "127.0.0.2")
    assert _addresses(_udp(responder, "moving.demo.test", "A")) == ["127.0.0.2"]
    responder.set_a("moving.demo.test", "127.0.0.3")
    assert _addresses(_udp(responder, "moving.demo.test", "A")) == ["127.0.0.3"]
    assert _addresses(_tcp(responder, "moving.demo.test", "A")) == ["127.0.0.3"]
    responder.ttl = 30
    assert _udp(responder, "moving.demo.test", "A").answer[0].ttl == 30
    assert responder.remove("moving.demo.test") is True
    assert _udp(responder, "moving.demo.test", "A").rcode() == dns.rcode.NXDOMAIN
    assert responder.remove("moving.demo.test") is False


def test_setting_one_family_keeps_the_other(responder: DnsResponder) -> None:
    responder.set_a("dual.demo.test", "127.0.0.2")
    responder.set_aaaa("dual.demo.test", "::1")
    responder.set_a("dual.demo.test", "127.0.0.3")
    assert _addresses(_udp(responder, "dual.demo.test", "AAAA")) == ["::1"]
    assert _addresses(_udp(responder, "dual.demo.test", "A")) == ["127.0.0.3"]


def test_bad_addresses_are_refused_when_set(responder: DnsResponder) -> None:
    with pytest.raises(ValueError):
        responder.set_a("bad.demo.test", "::1")
    with pytest.raises(ValueError):
        responder.set_aaaa("bad.demo.test", "127.0.0.1")
    with pytest.raises(ValueError):
        responder.set_a("bad.demo.test", "not-an-address")


def test_queries_are_counted_per_name_type_and_transport(responder: DnsResponder) -> None:
    responder.set_a("counted.demo.test", "127.0.0.2")
    _udp(responder, "counted.demo.test", "A")
    _tcp(responder, "COUNTED.demo.test.", "A")
    _udp(responder, "counted.demo.test", "AAAA")
    _udp(responder, "missing.demo.test", "A")
    assert responder.query_count("counted.demo.test") == 3
    assert responder.query_count("counted.demo.test", "A") == 2
    assert responder.query_count("counted.demo.test", "aaaa") == 1
    assert responder.query_count("missing.demo.test") == 1
    assert (responder.udp_messages, responder.tcp_messages) == (3, 1)
    responder.reset_counts()
    assert responder.query_count("counted.demo.test") == 0
    assert responder.udp_messages == 0


def test_several_queries_share_one_tcp_connection(responder: DnsResponder) -> None:
    names = [f"host{i}.demo.test" for i in range(20)]
    for i, name in enumerate(names):
        responder.set_a(name, f"127.0.1.{i}")
    with socket.create_connection(responder.address, timeout=TIMEOUT) as connection:
        # Pipelined: every query is written before any answer is read.
        for name in names:
            wire = dns.message.make_query(name, "A").to_wire()
            connection.sendall(struct.pack("!H", len(wire)) + wire)
        for i, name in enumerate(names):
            response, _ = dns.query.receive_tcp(connection, _deadline())
            assert response.question[0].name.to_text() == f"{name}."
            assert _addresses(response) == [f"127.0.1.{i}"]


def test_many_parallel_queries_are_all_answered(responder: DnsResponder) -> None:
    names = [f"parallel{i}.demo.test" for i in range(50)]
    for i, name in enumerate(names):
        responder.set_a(name, f"127.0.2.{i}")
    jobs = [(ask, i, name) for i, name in enumerate(names) for ask in (_udp, _tcp)] * 4

    def run(job: tuple[Query, int, str]) -> bool:
        ask, i, name = job
        return _addresses(ask(responder, name, "A")) == [f"127.0.2.{i}"]

    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(run, jobs))
    assert len(results) == 400
    assert all(results)


def test_a_burst_of_udp_datagrams_from_one_socket_is_all_answered(
    responder: DnsResponder,
) -> None:
    responder.set_a("burst.demo.test", "127.0.0.2")
    count = 300
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.settimeout(TIMEOUT)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        for query_id in range(count):
            query = dns.message.make_query("burst.demo.test", "A")
            query.id = query_id
            client.sendto(query.to_wire(), responder.address)
        answered = set()
        for _ in range(count):
            answer = dns.message.from_wire(client.recv(4096))
            assert _addresses(answer) == ["127.0.0.2"]
            answered.add(answer.id)
    assert answered == set(range(count))


def test_malformed_packets_are_ignored(responder: DnsResponder) -> None:
    responder.set_a("robust.demo.test", "127.0.0.2")
    garbage = [b"", b"\x00", b"\xff" * 11, b"\x12\x34" + b"\x01" * 40, bytes(range(256))]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        for packet in garbage:
            client.sendto(packet, responder.address)
        # A response (QR set) is not answered either: no reflection loops.
        reply_like = dns.message.make_response(dns.message.make_query("robust.demo.test", "A"))
        client.sendto(reply_like.to_wire(), responder.address)
        client.settimeout(0.3)
        with pytest.raises(TimeoutError):
            client.recv(4096)
    with socket.create_connection(responder.address, timeout=TIMEOUT) as connection:
        # Garbage inside a well-framed TCP message leaves the connection usable.
        connection.sendall(struct.pack("!H", 5) + b"\xde\xad\xbe\xef\x00")
        wire = dns.message.make_query("robust.demo.test", "A").to_wire()
        connection.sendall(struct.pack("!H", len(wire)) + wire)
        response, _ = dns.query.receive_tcp(connection, _deadline())
        assert _addresses(response) == ["127.0.0.2"]
    assert _addresses(_udp(responder, "robust.demo.test", "A")) == ["127.0.0.2"]


def test_oversized_udp_answer_is_truncated_and_complete_over_tcp(
    responder: DnsResponder,
) -> None:
    many = [f"127.0.3.{i}" for i in range(1, 101)]  # 100 A records: well over 512 bytes
    responder.set_a("big.demo.test", *many)
    query = dns.message.make_query("big.demo.test", "A", use_edns=False)
    response = dns.query.udp(query, responder.host, port=responder.port, timeout=TIMEOUT)
    assert response.flags & dns.flags.TC
    assert _addresses(_tcp(responder, "big.demo.test", "A")) == sorted(many)


def test_non_query_opcodes_are_not_implemented() -> None:
    records = DnsRecords()
    records.set("x.demo.test", dns.rdatatype.A, ("127.0.0.2",))
    notify = dns.message.make_query("x.demo.test", "SOA")
    notify.set_opcode(dns.opcode.NOTIFY)
    wire = build_response(notify.to_wire(), records, ttl=1, over_udp=True)
    assert wire is not None
    assert dns.message.from_wire(wire).rcode() == dns.rcode.NOTIMP


def test_stop_releases_the_port_for_udp_and_tcp() -> None:
    responder = DnsResponder().start()
    port = responder.port
    assert port > 0
    responder.set_a("x.demo.test", "127.0.0.2")
    # An open TCP client connection must not keep stop() waiting.
    with socket.create_connection(responder.address, timeout=TIMEOUT):
        responder.stop()
    responder.stop()  # idempotent
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", port))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", port))
    # And a new responder can serve on the very same port.
    with DnsResponder(port=port) as again:
        again.set_a("x.demo.test", "127.0.0.5")
        assert _addresses(_udp(again, "x.demo.test", "A")) == ["127.0.0.5"]
        assert _addresses(_tcp(again, "x.demo.test", "A")) == ["127.0.0.5"]


def test_start_twice_is_an_error(responder: DnsResponder) -> None:
    with pytest.raises(RuntimeError):
        responder.start()
