"""Shared by the proxyless gRPC tests: manifests, a controller serving them, decoded resources."""

from __future__ import annotations

from envoy.config.core.v3.base_pb2 import Node
from google.protobuf.message import Message

from dragoman.envoy.text.snapshot_yaml import SECTIONS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.runtime.controller import Controller
from dragoman.snapshots.resources import Snapshot
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.status_builds import store_of

# What grpcio 1.85 sends (logged from a real client), and what Envoy sends.
GRPC_NODE = Node(
    id="grpc-client",
    cluster="checkout",
    user_agent_name="gRPC C-core linux Python",
    user_agent_version="C-core 58.0.0 Python 1.85.1",
    client_features=["envoy.lb.does_not_support_overprovisioning", "xds.config.resource-in-sotw"],
)
ENVOY_NODE = Node(id="envoy", cluster="default/gw", user_agent_name="envoy")

WEB = "web.default.svc.cluster.local:50051"
API = "api.default.svc.cluster.local:8000"
SECURE = "secure.default.svc.cluster.local:443"
HYBRID = "hybrid.default.svc.cluster.local:50051"
GREETER = "greeter.example.com:8080"
SHOP = "shop.example.com:8080"

SERVICES = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports:
    - {name: grpc, port: 50051, targetPort: 9000}
    - {name: dns, port: 53, protocol: UDP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: grpc, port: 9000}]
endpoints:
  - {addresses: [10.0.0.1], conditions: {ready: true}, zone: zone-a}
  - {addresses: [10.0.0.2], conditions: {ready: true}, zone: zone-a}
  - {addresses: [10.0.1.1], conditions: {ready: true}, zone: zone-b}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec: {type: ExternalName, externalName: api.example.com., ports: [{port: 8000}]}
---
apiVersion: v1
kind: Service
metadata: {name: secure, namespace: default}
spec: {type: ExternalName, externalName: secure.example.com, ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata:
  name: hybrid
  namespace: default
  annotations: {dragoman.dev/prefer-service: web}
spec: {type: ExternalName, externalName: legacy.example.com, ports: [{port: 50051}]}
---
apiVersion: v1
kind: Service
metadata: {name: sneaky, namespace: default}
spec: {type: ExternalName, externalName: localhost, ports: [{port: 80}]}
"""

ROUTES = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: greeter, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [greeter.example.com, "*.wild.example.com"]
  rules:
    - matches: [{method: {service: helloworld.Greeter, method: SayHello}}]
      backendRefs: [{name: web, port: 50051}]
    - matches: [{method: {service: helloworld.Greeter}}]
      backendRefs:
        - {name: web, port: 50051, weight: 3}
        - {name: api, port: 8000, weight: 1}
    - backendRefs: [{name: secure, port: 443}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [shop.example.com]
  rules:
    - matches: [{path: {type: PathPrefix, value: /shop.Cart}}]
      backendRefs: [{name: web, port: 50051}]
      timeouts: {request: 10s, backendRequest: 2s}
    - matches: [{path: {type: PathPrefix, value: /shop.Cart/Add/more}}]
      backendRefs: [{name: web, port: 50051}]
    - matches: [{path: {type: PathPrefix, value: /}, queryParams: [{name: debug, value: "1"}]}]
      backendRefs: [{name: api, port: 8000}]
    - matches: [{path: {type: PathPrefix, value: /}, method: GET}]
      backendRefs: [{name: api, port: 8000}]
    - matches: [{path: {type: PathPrefix, value: /old}}]
      filters: [{type: RequestRedirect, requestRedirect: {hostname: new.example.com}}]
    - matches: [{path: {type: PathPrefix, value: /}, headers: [{name: X-Tenant, value: blue}]}]
      backendRefs: [{name: missing, port: 80}]
"""


def serving(*texts: str) -> tuple[Controller, SnapshotCache]:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    controller = Controller(cache)
    controller.update(store_of(*texts))
    return controller, cache


def grpc_snapshot(cache: SnapshotCache, node_cluster: str = "") -> Snapshot:
    return cache.snapshot_for(cache.group_for(node_cluster, grpc=True))


_CLASSES = {type_url: message_class for _, type_url, message_class in SECTIONS}


def decoded(snapshot: Snapshot, type_url: str, name: str) -> Message:
    resource = snapshot.of_type(type_url).resources[name]
    return _CLASSES[type_url].FromString(resource.body)
