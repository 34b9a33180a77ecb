"""A small served world for the operations tests (metrics, health, the debug page): a
Gateway with routes to a pod-backed Service and to two ExternalNames, its endpoints, and a
bounded wait."""

from __future__ import annotations

import asyncio
import time

GATEWAY = """
    apiVersion: gateway.networking.k8s.io/v1
    kind: Gateway
    metadata: {name: edge, namespace: default}
    spec:
      gatewayClassName: dragoman
      listeners: [{name: http, protocol: HTTP, port: 8080}]
    ---
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: shop, namespace: default}
    spec:
      parentRefs: [{name: edge}]
      rules:
        - matches: [{path: {type: PathPrefix, value: /api}}]
          backendRefs: [{name: partner, port: 443}]
        - matches: [{path: {type: PathPrefix, value: /local}}]
          backendRefs: [{name: sneaky, port: 80}]
        - backendRefs: [{name: web, port: 80}]
    """
SERVICES = """
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec:
      selector: {app: web}
      ports: [{port: 80, targetPort: 8080}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: partner, namespace: default}
    spec: {type: ExternalName, externalName: api.partner.example, ports: [{port: 443}]}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: sneaky, namespace: default}
    spec: {type: ExternalName, externalName: localhost, ports: [{port: 80}]}
    """


def endpoints(*addresses: str) -> str:
    listed = ", ".join(f"{{addresses: [{address}]}}" for address in addresses)
    return f"""
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata:
          name: web-1
          namespace: default
          labels: {{kubernetes.io/service-name: web}}
        addressType: IPv4
        ports: [{{port: 8080}}]
        endpoints: [{listed}]
        """


async def until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
