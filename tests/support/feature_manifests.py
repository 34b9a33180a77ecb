"""One manifest set that uses every feature dragoman serves, and the DAG built from it.

For checks that must hold over real builds rather than hand-made DAGs: DAG invariants, no
deprecated Envoy field in what is emitted, Envoy accepting the configuration. Each feature
is here once; a new one belongs here too.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.objects import KubeObject
from tests.support.certificates import certificate_authority
from tests.support.status_builds import build_text, objects

EXAMPLES = Path(__file__).parents[2] / "examples"

_SITE_CA = certificate_authority("feature manifests CA")
_SITE = _SITE_CA.issue("secure.example.com", "*.secure.example.com")
_BACKEND_CA = certificate_authority("feature manifests backend CA")


def _indented(pem: bytes, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in pem.decode().splitlines())


_FRONTENDS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: dragoman}
spec: {controllerName: dragoman.dev/gateway-controller}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {team: apps}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: wild, protocol: HTTP, port: 80, hostname: "*.example.com"}
  - {name: exact, protocol: HTTP, port: 80, hostname: api.example.com,
     allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: apps}}}}}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: secure.example.com
    tls: {certificateRefs: [{name: site}]}
  - name: https-any
    protocol: HTTPS
    port: 443
    tls: {certificateRefs: [{name: site}]}
  - {name: grpc, protocol: HTTP, port: 8081, allowedRoutes: {kinds: [{kind: GRPCRoute}]}}
  - {name: tcp, protocol: TCP, port: 9000}
  - {name: udp, protocol: UDP, port: 9000}
  - {name: tls-pass, protocol: TLS, port: 8443, hostname: "*.partner.example",
     tls: {mode: Passthrough}}
  - {name: tls-end, protocol: TLS, port: 8443, hostname: db.example.com,
     tls: {mode: Terminate, certificateRefs: [{name: site}]}}
  - {name: unsupported, protocol: example.com/sctp, port: 9100}
  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {team: apps}}}}
---
# Another team's listeners on the edge Gateway, with its own route.
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: apps-listeners, namespace: apps}
spec:
  parentRef: {name: edge, namespace: default}
  listeners:
  - {name: apps-http, protocol: HTTP, port: 80, hostname: apps.example.org}
  - {name: apps-tcp, protocol: TCP, port: 9200}
---
# Shares port 80 with edge: left out of the all-gateways group, served to its own Envoys.
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: second, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
  - {name: udp, protocol: UDP, port: 5353}
  # Presented to the backends its routes reach over TLS (its own variants of those clusters).
  tls: {backend: {clientCertificateRef: {name: site}}}
"""

_SERVICES = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
  - {name: grpc, port: 9090, targetPort: 9090, appProtocol: kubernetes.io/h2c}
  - {name: ws, port: 8088, targetPort: 8088, appProtocol: kubernetes.io/ws}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: grpc, port: 9090}, {name: ws, port: 8088}]
endpoints:
- {addresses: [10.0.0.1], zone: a, conditions: {ready: true}}
- {addresses: [10.0.0.2], zone: b, conditions: {ready: true}}
- {addresses: [10.0.0.3], conditions: {ready: false}}
---
# Reached through Gateway second only: its Envoys need the cluster the all-gateways lack.
apiVersion: v1
kind: Service
metadata: {name: second-only, namespace: default}
spec: {selector: {app: second-only}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: secure-pods, namespace: default}
spec: {selector: {app: secure}, ports: [{name: https, port: 8443}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: apps}
spec: {selector: {app: api}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata:
  name: external
  namespace: default
  annotations:
    dragoman.dev/dns-lookup-family: v4
    dragoman.dev/dns-refresh-rate: 10s
    dragoman.dev/dns-respect-ttl: "false"
    dragoman.dev/dns-failure-refresh-base: 2s
    dragoman.dev/dns-failure-refresh-max: 20s
    dragoman.dev/dns-jitter: 1s
    dragoman.dev/dns-min-refresh-rate: 5s
    dragoman.dev/dns-resolvers: "10.0.0.53, [fd00::53]:5353"
spec: {type: ExternalName, externalName: api.partner.example, ports: [{port: 8080}]}
---
apiVersion: v1
kind: Service
metadata:
  name: logical
  namespace: default
  annotations:
    dragoman.dev/dns-mode: logical
    dragoman.dev/dns-lookup-family: all
    dragoman.dev/dns-happy-eyeballs-first-family: v6
    dragoman.dev/dns-happy-eyeballs-first-family-count: "2"
spec: {type: ExternalName, externalName: one.partner.example, ports: [{port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: tls-external, namespace: default}
spec: {type: ExternalName, externalName: secure.partner.example, ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: h2-external, namespace: default}
spec:
  type: ExternalName
  externalName: grpc.partner.example
  ports: [{port: 443, appProtocol: kubernetes.io/h2c}]
---
apiVersion: v1
kind: Service
metadata: {name: alias, namespace: default}
spec: {type: ExternalName, externalName: web.default.svc.cluster.local, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata:
  name: migrating
  namespace: default
  annotations: {dragoman.dev/prefer-service: web}
spec: {type: ExternalName, externalName: legacy.partner.example, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: database, namespace: default}
spec: {type: ExternalName, externalName: db.partner.example, ports: [{port: 5432}]}
---
apiVersion: v1
kind: Service
metadata: {name: syslog, namespace: default}
spec:
  type: ExternalName
  externalName: logs.partner.example
  ports: [{port: 514, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec: {selector: {app: dns}, ports: [{name: dns, port: 53, protocol: UDP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: default, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: dns, port: 5353, protocol: UDP}]
endpoints: [{addresses: [10.0.0.53], conditions: {ready: true}}]
---
apiVersion: v1
kind: Service
metadata: {name: unsafe, namespace: default}
spec: {type: ExternalName, externalName: metadata.google.internal, ports: [{port: 80}]}
"""

_ROUTES = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: features, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: http}, {name: second}]
  rules:
  - matches:
    - path: {type: Exact, value: /exact}
      headers: [{name: version, value: two}, {type: RegularExpression, name: x-id, value: "[0-9]+"}]
      queryParams: [{name: q, value: one}, {type: RegularExpression, name: r, value: "a.*"}]
      method: POST
    - path: {type: RegularExpression, value: "/re/[a-z]+"}
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: x-set, value: s}]
        add: [{name: x-add, value: a}]
        remove: [x-remove]
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: x-served-by, value: dragoman}]}
    backendRefs:
    - name: web
      port: 80
      weight: 3
      filters:
      - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-b, value: web}]}}
    - {name: external, port: 8080, weight: 1}
    - {name: missing, port: 80, weight: 1}
  - matches: [{path: {value: /redirect}}]
    filters:
    - type: RequestRedirect
      requestRedirect:
        scheme: https
        hostname: secure.example.com
        statusCode: 301
        path: {type: ReplacePrefixMatch, replacePrefixMatch: /moved}
  - matches: [{path: {value: /redirect-port}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {port: 8443, path: {type: ReplaceFullPath, replaceFullPath: /x}}
  - matches: [{path: {value: /rewrite}}]
    filters:
    - type: URLRewrite
      urlRewrite:
        hostname: rewritten.example
        path: {type: ReplacePrefixMatch, replacePrefixMatch: /}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /full}}]
    filters:
    - type: URLRewrite
      urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /replaced}}
    - type: RequestMirror
      requestMirror: {backendRef: {name: tls-external, port: 443}, percent: 25}
    - type: RequestMirror
      requestMirror: {backendRef: {name: web, port: 80}, fraction: {numerator: 1, denominator: 3}}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /slow}}]
    timeouts: {request: 10s, backendRequest: 2s}
    retry: {codes: [500, 502, 503, 504], attempts: 2, backoff: 100ms}
    backendRefs: [{name: logical, port: 8080}]
  - matches: [{path: {value: /retried}}]
    timeouts: {backendRequest: 1s}
    retry: {attempts: 3}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /unhurried}}]
    timeouts: {request: 0s}
    backendRefs: [{name: alias, port: 80}]
  - matches: [{path: {value: /migrating}}]
    backendRefs: [{name: migrating, port: 80}]
  - matches: [{path: {value: /ws}}]
    backendRefs: [{name: web, port: 8088}]
  - matches: [{path: {value: /tls}}]
    backendRefs: [{name: tls-external, port: 443}, {name: secure-pods, port: 8443}]
  - matches: [{path: {value: /h2}}]
    backendRefs: [{name: h2-external, port: 443}]
  - matches: [{path: {value: /unsafe}}]
    backendRefs: [{name: unsafe, port: 80}]
  - matches: [{path: {value: /cors}}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"]}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: second-only, namespace: default}
spec:
  parentRefs: [{name: second}]
  rules: [{matches: [{path: {value: /second}}], backendRefs: [{name: second-only, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: hosts, namespace: default}
spec:
  parentRefs: [{name: edge}]
  hostnames: ["*.example.com", foo.example.com, secure.example.com, other.org]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cross, namespace: apps}
spec:
  parentRefs: [{name: edge, namespace: default, sectionName: exact}]
  hostnames: [api.example.com]
  rules:
  - backendRefs: [{name: api, port: 80}, {name: web, namespace: default, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: apps-site, namespace: apps}
spec:
  parentRefs: [{kind: ListenerSet, name: apps-listeners}]
  rules: [{backendRefs: [{name: api, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: apps-tcp, namespace: apps}
spec:
  parentRefs: [{kind: ListenerSet, name: apps-listeners, sectionName: apps-tcp}]
  rules: [{backendRefs: [{name: api, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: apps-to-web, namespace: default}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}]
  to: [{group: "", kind: Service, name: web}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: grpc}]
  rules:
  - matches:
    - method: {service: pkg.Echo, method: Echo}
      headers: [{name: version, value: two}]
    - method: {type: RegularExpression, service: "pkg\\\\.Other.*"}
    backendRefs: [{name: web, port: 9090, weight: 2}, {name: h2-external, port: 443}]
  - backendRefs: [{name: missing, port: 9090}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: database, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: tcp}]
  rules:
  - backendRefs:
    - {name: database, port: 5432, weight: 3}
    - {name: web, port: 80, weight: 1}
    - {name: missing, port: 5432, weight: 1}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: partner, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: tls-pass}]
  hostnames: [api.partner.example, "*.partner.example"]
  rules: [{backendRefs: [{name: tls-external, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: database-tls, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: tls-end}]
  hostnames: [db.example.com]
  rules: [{backendRefs: [{name: database, port: 5432}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: logs, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: udp}]
  rules: [{backendRefs: [{name: syslog, port: 514}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns, namespace: default}
spec:
  parentRefs: [{name: second, sectionName: udp}]
  rules: [{backendRefs: [{name: dns, port: 53}]}]
"""


def _policies() -> str:
    return f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: backend-ca, namespace: default}}
data:
  ca.crt: |
{_indented(_BACKEND_CA.pem, 4)}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: secure-pods, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: secure-pods}}]
  validation:
    hostname: secure-pods.internal.example
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
    subjectAltNames: [{{type: Hostname, hostname: secure-pods.internal.example}},
                      {{type: URI, uri: "spiffe://cluster.local/ns/default/sa/secure"}}]
---
apiVersion: dragoman.dev/v1alpha1
kind: BackendPolicy
metadata: {{name: web, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: web}}]
  healthCheck:
    active:
      type: HTTP
      interval: 5s
      timeout: 500ms
      unhealthyThreshold: 2
      healthyThreshold: 2
      http: {{path: /healthz, method: HEAD, expectedStatuses: [200, 204]}}
    passive: {{consecutive5XxErrors: 3, consecutiveGatewayErrors: 2, interval: 2s,
               baseEjectionTime: 10s, maxEjectionPercent: 50}}
    panicThreshold: 0
  circuitBreaker: {{maxConnections: 100, maxPendingRequests: 10, maxParallelRequests: 200,
                    maxParallelRetries: 5, maxRequestsPerConnection: 1000}}
  timeout:
    tcp: {{connectTimeout: 2s}}
    http: {{connectionIdleTimeout: 30s, maxConnectionDuration: 1h}}
  loadBalancer: {{type: LeastRequest, slowStart: {{window: 30s}}}}
  failover: [{{name: api, namespace: apps}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {{name: failover-from-default, namespace: apps}}
spec:
  from: [{{group: dragoman.dev, kind: BackendPolicy, namespace: default}}]
  to: [{{group: "", kind: Service, name: api}}]
---
apiVersion: dragoman.dev/v1alpha1
kind: BackendPolicy
metadata: {{name: external, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: external}}]
  healthCheck:
    active:
      type: TCP
      tcp: {{send: {{type: Text, text: PING}}, receive: {{type: Binary, binary: UE9ORw==}}}}
    passive: {{splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 2,
               failurePercentageThreshold: 90}}
  tcpKeepalive: {{probes: 3, idleTime: 60s, interval: 10s}}
  http2: {{connectionKeepalive: {{interval: 30s, timeout: 5s}}}}
  loadBalancer:
    type: ConsistentHash
    consistentHash: {{type: Cookie, cookie: {{name: affinity, ttl: 1h}}}}
"""


# A credential injected toward an external host (a CredentialInjector and its Secret), and
# one whose key is missing (its rule answers 500).
_CREDENTIALS = """
apiVersion: v1
kind: Secret
metadata: {name: partner-token, namespace: default}
stringData: {token: "Bearer feature-token"}
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {name: partner, namespace: default}
spec: {secretRef: {name: partner-token, key: token}, header: X-Api-Key, overwrite: true}
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {name: missing-key, namespace: default}
spec: {secretRef: {name: partner-token, key: nope}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: credentials, namespace: default}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  hostnames: [partner.features.example]
  rules:
  - filters:
    - type: ExtensionRef
      extensionRef: {group: dragoman.dev, kind: CredentialInjector, name: partner}
    backendRefs: [{name: external, port: 8080}]
  - matches: [{path: {value: /missing}}]
    filters:
    - type: ExtensionRef
      extensionRef: {group: dragoman.dev, kind: CredentialInjector, name: missing-key}
    backendRefs: [{name: external, port: 8080}]
"""


def every_feature_manifests() -> str:
    return "\n---\n".join(
        [_FRONTENDS, _SITE.secret_yaml("site"), _SERVICES, _ROUTES, _policies(), _CREDENTIALS]
    )


def every_feature_dag(options: BuildOptions = BuildOptions()) -> Dag:
    """The DAG of every feature: checked against tests/support/dag_invariants.py as it is built."""
    return build_text(every_feature_manifests(), options=options)


def every_feature_dag_with_dns_check() -> Dag:
    """The same with the DNS check on, each external name resolved (one of them refused)."""
    dns = {
        "api.partner.example": DnsObservation(("203.0.113.10",)),
        "one.partner.example": DnsObservation(("203.0.113.11",), error="Timeout"),
        "secure.partner.example": DnsObservation(("203.0.113.12",)),
        "grpc.partner.example": DnsObservation(("169.254.169.254",)),
    }
    return build_text(every_feature_manifests(), options=BuildOptions(dns_check=True), dns=dns)


def example_objects() -> list[KubeObject]:
    """Every manifest under examples/ (the demo's and the compose setup's)."""
    found: list[KubeObject] = []
    for directory in (EXAMPLES / "manifests", EXAMPLES / "compose"):
        for path in sorted(directory.glob("*.yaml")):
            found.extend(objects(path.read_text()))
    return found
