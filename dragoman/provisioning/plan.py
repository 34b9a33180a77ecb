"""The Kubernetes objects dragoman provisions for one Gateway, computed without a cluster.

Deployment, Service, ServiceAccount, PodDisruptionBudget and the bootstrap ConfigMap, all
called `dragoman-<gateway>` (names.py), in the Gateway's namespace, owned by the Gateway
(deleted with it), with its spec.infrastructure labels and annotations. Its Envoys connect
to dragoman with the Gateway's own xDS identity (`spiffe://dragoman.dev/gateway/<ns>/<name>`),
from the Secret `dragoman-<gateway>-xds`, and so receive that Gateway alone.

A plan with problems holds no object: bad parameters, a port its Service cannot expose or
a name taken by an object the Gateway does not own change nothing in the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dragoman.dag.model import Problem
from dragoman.envoy.bootstrap.envoy_bootstrap import (
    XdsClientTls,
    bootstrap_yaml,
    xds_tls_secret_files,
)
from dragoman.objects import Gateway, GatewayListener, ObjectKey
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.provisioning.names import (
    object_annotations,
    object_labels,
    object_name,
    selector_labels,
    xds_secret_name,
)
from dragoman.provisioning.parameters import EnvoyProxySettings
from dragoman.provisioning.workload import (
    ADMIN_SOCKET,
    BOOTSTRAP_DIRECTORY,
    DEFAULT_REPLICAS,
    STATS_PORT,
    TLS_DIRECTORY,
    ProvisionSettings,
    max_unavailable,
    pod_spec,
)
from dragoman.security.identities import gateway_uri

# GEP-713: a condition type of one implementation's own is prefixed with its domain.
PROVISIONED = "dragoman.dev/Provisioned"
# The kinds provisioned, as (apiVersion, kind), in the order they are applied: the Service
# last, so that a set refused part way never had a Service (often a cloud load balancer) in
# front of pods it lacks.
PROVISIONED_KINDS = (
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Service"),
)
DEFAULT_PROVISION = ProvisionSettings()
DEFAULT_SERVICE_TYPE = "LoadBalancer"
# Keeps the client's address, which session affinity and access logs depend on.
DEFAULT_TRAFFIC_POLICY = "Local"


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One ownerReferences entry of an object already in the cluster."""

    kind: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class GatewayPlan:
    gateway: ObjectKey
    name: str  # of every provisioned object
    identity: str  # the xDS client identity its Envoys present
    xds_secret: str  # the Secret holding that identity's certificate
    objects: tuple[dict[str, Any], ...]  # empty when there are problems
    problems: tuple[Problem, ...] = ()
    generation: int = 0
    # The xDS Secret without its data, when dragoman issues the certificate itself (with
    # the CA of `ProvisionSettings.ca_secret`); None: the Secret is provided otherwise.
    issued_secret: dict[str, Any] | None = None

    def condition(self) -> dict[str, Any]:
        """The Gateway's `dragoman.dev/Provisioned` condition (without its time)."""
        if self.problems:
            return {
                "type": PROVISIONED,
                "status": "False",
                "reason": self.problems[0].reason,
                "message": "; ".join(f"{p.field}: {p.message}" for p in self.problems),
                "observedGeneration": self.generation,
            }
        kinds = ", ".join(kind for _, kind in PROVISIONED_KINDS)
        issued = ", which must be provided (dragoman does not issue it)"
        if self.issued_secret is not None:
            issued = ", issued by dragoman"
        elif any(obj["kind"] == "Certificate" for obj in self.objects):
            issued = ", issued by cert-manager"
        return {
            "type": PROVISIONED,
            "status": "True",
            "reason": "Provisioned",
            "message": f"{kinds} {self.name}; xDS identity {self.identity} "
            f"from Secret {self.xds_secret}{issued}",
            "observedGeneration": self.generation,
        }


def plan_gateway(
    gateway: Gateway,
    listeners: Sequence[GatewayListener],
    settings: EnvoyProxySettings,
    provision: ProvisionSettings = DEFAULT_PROVISION,
    *,
    existing: Mapping[ObjectKey, tuple[OwnerRef, ...]] | None = None,
    problems: Sequence[Problem] = (),
) -> GatewayPlan:
    """What to create for `gateway`, serving `listeners` (its accepted ones).

    `existing`: objects already there (by kind, namespace, name) and their owners, to refuse
    a name another object holds. `problems`: found before (its parameters), reported with
    those found here.
    """
    name = object_name(gateway.meta.name)
    found = [*problems, *_name_conflicts(gateway, name, existing or {})]
    service_ports = _service_ports(gateway, listeners, found)
    identity = _identity(gateway, found)
    plan = GatewayPlan(
        gateway=gateway.key,
        name=name,
        identity=identity,
        xds_secret=xds_secret_name(gateway.meta.name),
        objects=(),
        problems=tuple(found),
        generation=gateway.meta.generation,
    )
    if found:
        return plan
    objects = _objects(gateway, name, plan.xds_secret, service_ports, settings, provision)
    issued = None
    if provision.ca_secret:
        issued = _object(gateway, "v1", "Secret", plan.xds_secret, type="kubernetes.io/tls")
    return dataclasses.replace(plan, objects=objects, issued_secret=issued)


def _identity(gateway: Gateway, problems: list[Problem]) -> str:
    """The Gateway's xDS identity; "" (a problem) for a name no identity can hold (the
    API allows a label of a Gateway's name longer than a DNS label, an identity does not)."""
    try:
        return gateway_uri(f"{gateway.meta.namespace}/{gateway.meta.name}")
    except ValueError as error:
        problems.append(Problem(gateway.key, "metadata.name", "InvalidName", str(error)))
        return ""


def _objects(
    gateway: Gateway,
    name: str,
    xds_secret: str,
    service_ports: list[dict[str, Any]],
    settings: EnvoyProxySettings,
    provision: ProvisionSettings,
) -> tuple[dict[str, Any], ...]:
    selector = selector_labels(gateway)  # copied where used: YAML would alias one dict
    container_ports = [
        {"name": port["name"], "containerPort": port["port"], "protocol": port["protocol"]}
        for port in service_ports
    ]
    replicas = DEFAULT_REPLICAS if settings.replicas is None else settings.replicas
    template = {
        "metadata": {
            "labels": {**object_labels(gateway), "dragoman.dev/envoy": "true"},
            **_annotations(gateway),
        },
        "spec": pod_spec(
            settings,
            provision,
            name=name,
            xds_secret=xds_secret,
            container_ports=container_ports,
            selector=dict(selector),
        ),
    }
    deployment_spec = {
        "replicas": replicas,
        "selector": {"matchLabels": dict(selector)},
        # One new pod ready before an old one drains: a rollout never lowers the capacity.
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
        },
        "template": template,
    }
    service_type = settings.service_type or DEFAULT_SERVICE_TYPE
    service_spec: dict[str, Any] = {"type": service_type, "selector": dict(selector)}
    if service_type != "ClusterIP":
        policy = settings.external_traffic_policy or DEFAULT_TRAFFIC_POLICY
        service_spec["externalTrafficPolicy"] = policy
    service_spec["ports"] = service_ports
    disruption = {
        "maxUnavailable": max_unavailable(replicas),
        "selector": {"matchLabels": dict(selector)},
    }
    made = (
        _object(gateway, "v1", "ServiceAccount", name, automountServiceAccountToken=False),
        _object(gateway, "v1", "ConfigMap", name, data=_bootstrap_files(gateway, provision)),
        _object(gateway, "apps/v1", "Deployment", name, spec=deployment_spec),
        _object(gateway, "policy/v1", "PodDisruptionBudget", name, spec=disruption),
        _object(gateway, "v1", "Service", name, spec=service_spec),
    )
    if not provision.certificate_issuer:
        return made
    return (*made, _certificate(gateway, xds_secret, provision.certificate_issuer))


def _certificate(gateway: Gateway, xds_secret: str, issuer: str) -> dict[str, Any]:
    """A cert-manager Certificate issuing (and renewing) the Gateway's xDS client
    certificate into its Secret; `issuer` is `Issuer/NAME` or `ClusterIssuer/NAME`."""
    kind, _, issuer_name = issuer.partition("/")
    spec = {
        "secretName": xds_secret,
        "uris": [gateway_uri(f"{gateway.meta.namespace}/{gateway.meta.name}")],
        "usages": ["client auth", "digital signature"],
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "duration": "2160h",
        "renewBefore": "720h",
        "issuerRef": {"group": "cert-manager.io", "kind": kind, "name": issuer_name},
    }
    return _object(gateway, "cert-manager.io/v1", "Certificate", xds_secret, spec=spec)


def _object(
    gateway: Gateway, api_version: str, kind: str, name: str, **body: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": gateway.meta.namespace,
        "labels": object_labels(gateway),
        **_annotations(gateway),
    }
    if gateway.meta.uid:
        # Without the Gateway's uid (a manifest not yet applied) no reference can be made;
        # `serve --provision` always has it.
        metadata["ownerReferences"] = [
            {
                "apiVersion": f"{GATEWAY_GROUP}/v1",
                "kind": "Gateway",
                "name": gateway.meta.name,
                "uid": gateway.meta.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def _annotations(gateway: Gateway) -> dict[str, Any]:
    annotations = object_annotations(gateway)
    return {"annotations": dict(annotations)} if annotations else {}


def _bootstrap_files(gateway: Gateway, provision: ProvisionSettings) -> dict[str, str]:
    """What `dragoman bootstrap --gateway NS/NAME` prints with the pod's paths, and the two
    SDS files that deliver the xDS certificate (re-read when the Secret rotates)."""
    tls = XdsClientTls(
        trusted_ca=f"{TLS_DIRECTORY}/ca.crt",
        certificate=f"{TLS_DIRECTORY}/tls.crt",
        private_key=f"{TLS_DIRECTORY}/tls.key",
        server_name=provision.xds_server_name,
        sds_directory=BOOTSTRAP_DIRECTORY,
    )
    bootstrap = bootstrap_yaml(
        provision.xds_address,
        node_id="envoy",
        node_cluster=f"{gateway.meta.namespace}/{gateway.meta.name}",
        admin_socket=ADMIN_SOCKET,
        xds_tls=tls,
        stats_address=f"0.0.0.0:{STATS_PORT}",
    )
    return {"bootstrap.yaml": bootstrap, **xds_tls_secret_files(tls)}


def _service_ports(
    gateway: Gateway, listeners: Sequence[GatewayListener], problems: list[Problem]
) -> list[dict[str, Any]]:
    """One Service port per listener port and transport (listeners sharing a port share
    it); a port the pod uses itself cannot be a listener's."""
    ports: dict[tuple[int, str], dict[str, Any]] = {}
    for listener in listeners:
        if listener.port == STATS_PORT:
            field = f"a ListenerSet's listener {listener.name!r} port"
            if listener in gateway.listeners:
                field = f"spec.listeners[{gateway.listeners.index(listener)}].port"
            problems.append(
                Problem(
                    gateway.key,
                    field,
                    "PortUnavailable",
                    f"port {STATS_PORT} is the provisioned Envoy's own (its stats and "
                    "readiness); the Service cannot expose a listener there",
                )
            )
            continue
        transport = "UDP" if listener.protocol == "UDP" else "TCP"
        ports.setdefault(
            (listener.port, transport),
            {
                "name": f"{transport.lower()}-{listener.port}",
                "port": listener.port,
                "targetPort": listener.port,
                "protocol": transport,
            },
        )
    return [ports[key] for key in sorted(ports)]


def _name_conflicts(
    gateway: Gateway, name: str, existing: Mapping[ObjectKey, tuple[OwnerRef, ...]]
) -> list[Problem]:
    conflicts = []
    for _, kind in PROVISIONED_KINDS:
        owners = existing.get(ObjectKey(kind, gateway.meta.namespace, name))
        if owners is None or any(_is_gateway(owner, gateway) for owner in owners):
            continue
        conflicts.append(
            Problem(
                gateway.key,
                "metadata.name",
                "NameConflict",
                f"{kind} {gateway.meta.namespace}/{name} exists and is not this Gateway's: "
                "nothing is provisioned until it is renamed or removed",
            )
        )
    return conflicts


def _is_gateway(owner: OwnerRef, gateway: Gateway) -> bool:
    if owner.kind != "Gateway" or owner.name != gateway.meta.name:
        return False
    return not owner.uid or not gateway.meta.uid or owner.uid == gateway.meta.uid
