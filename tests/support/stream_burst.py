"""Run as a child process: opens N delta ADS streams at once to ADDRESS, one connection each
(as N Envoys), sends each its first request, prints `sent` once every request is handed to
gRPC, and prints one JSON line once every stream has its first answer or has failed:
{"answered": n, "failed": {"CODE": n, ...}}."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter

import grpc
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import CLUSTER
from tests.support.xds_client import XdsClient

ANSWER_TIMEOUT_S = 60.0


async def one_stream(
    address: str, index: int, sent: list[asyncio.Event], outcome: Counter[str]
) -> None:
    options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own, as an Envoy
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        client = XdsClient(channel, Node(id=f"burst-{index}", cluster="burst"), delta=True)
        try:
            await client.subscribe(CLUSTER)
            sent[index].set()
            await client.receive(ANSWER_TIMEOUT_S)
            outcome["answered"] += 1
        except grpc.aio.AioRpcError as error:
            outcome[error.code().name] += 1
        except AssertionError:  # the server ended the stream without an answer
            outcome["ENDED"] += 1
        except TimeoutError:
            outcome["TIMEOUT"] += 1
        finally:
            sent[index].set()  # a stream that failed before its request was sent counts too
            client.cancel()


async def main(address: str, count: int) -> None:
    outcome: Counter[str] = Counter()
    sent = [asyncio.Event() for _ in range(count)]
    streams = [asyncio.create_task(one_stream(address, i, sent, outcome)) for i in range(count)]
    await asyncio.gather(*(event.wait() for event in sent))
    print("sent", flush=True)
    await asyncio.gather(*streams)
    answered = outcome.pop("answered", 0)
    print(json.dumps({"answered": answered, "failed": dict(outcome)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
