"""A proxyless gRPC client for the end-to-end tests, run as its own process (grpcio reads
GRPC_XDS_BOOTSTRAP / GRPC_XDS_BOOTSTRAP_CONFIG once per process).

Reads one JSON request per line on standard input, `{"target": "xds:///...", "service":
"...", "timeout": seconds}`, sends a grpc.health.v1 Health/Check through that target and
answers with one JSON line: `{"status": "SERVING"}` or `{"error": "NOT_FOUND: ..."}`.
Exits at the end of its input, or after --lifetime seconds whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lifetime", type=float, default=120.0)
    args = parser.parse_args()
    # A stuck test must never leave this process behind.
    watchdog = threading.Timer(args.lifetime, os._exit, args=(3,))
    watchdog.daemon = True
    watchdog.start()
    channels: dict[str, grpc.Channel] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        target = request["target"]
        channel = channels.get(target)
        if channel is None:
            channel = channels[target] = grpc.insecure_channel(target)
        print(json.dumps(_check(channel, request["service"], request.get("timeout", 10))))
        sys.stdout.flush()
    for channel in channels.values():
        channel.close()
    return 0


def _check(channel: grpc.Channel, service: str, timeout: float) -> dict[str, str]:
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as error:
        code = error.code().name if isinstance(error, grpc.Call) else "UNKNOWN"
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        return {"error": f"{code}: {details}"}
    return {"status": health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)}


if __name__ == "__main__":
    sys.exit(main())
