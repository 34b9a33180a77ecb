"""The Deployment of a Gateway's Envoys: the pod of deploy/04-envoy.yaml, one per Gateway.

Each pod runs Envoy with the bootstrap of its ConfigMap (what `dragoman bootstrap --gateway`
prints) and a `drain` container that runs `dragoman drain` when the pod stops; Envoy's own
preStop hook waits for that drain, and the grace period covers both.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

from dragoman.provisioning.parameters import EnvoyProxySettings

ADMIN_SOCKET = "/var/run/envoy/admin.sock"
RUN_DIRECTORY = "/var/run/envoy"
BOOTSTRAP_DIRECTORY = "/etc/envoy"
TLS_DIRECTORY = "/etc/envoy/tls"
# Envoy's listener exposing only /stats/prometheus and /ready of its admin interface.
STATS_PORT = 8002
DEFAULT_ENVOY_IMAGE = "envoyproxy/envoy:v1.40.0"
DEFAULT_REPLICAS = 2
DEFAULT_RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"memory": "1Gi"},
}
DRAINED_FILE = RUN_DIRECTORY + "/drained"


@dataclass(frozen=True, slots=True)
class ProvisionSettings:
    """What the provisioner itself decides, the same for every Gateway."""

    xds_address: str = "dragoman.dragoman-system.svc.cluster.local:18000"
    xds_server_name: str = "dragoman.dragoman-system.svc"
    drain_image: str = "ghcr.io/dragoman-dev/dragoman:0.1.0"
    # `dragoman drain --timeout`: the most a stopping pod waits for its connections.
    drain_timeout_seconds: int = 45
    # Envoy's --drain-time-s: how long draining listeners still accept connections.
    drain_time_seconds: int = 15
    # `Issuer/NAME` or `ClusterIssuer/NAME` of cert-manager: a Certificate for each
    # Gateway's xDS identity is provisioned too ("": its Secret is provided otherwise).
    certificate_issuer: str = ""
    # `NAMESPACE/NAME` of a kubernetes.io/tls Secret holding a CA dragoman's xDS port trusts
    # (tls.crt, tls.key; ca.crt: every CA to trust): `serve --provision` issues each
    # Gateway's xDS client certificate into its Secret with it, and issues it again once it
    # expires within `renew_before` ("": the Secret is provided otherwise).
    ca_secret: str = ""
    renew_before: datetime.timedelta = datetime.timedelta(days=30)

    @property
    def grace_period_seconds(self) -> int:
        """The drain's timeout plus time for Envoy to exit once it is over."""
        return self.drain_timeout_seconds + 15


def pod_spec(
    settings: EnvoyProxySettings,
    provision: ProvisionSettings,
    *,
    name: str,
    xds_secret: str,
    container_ports: list[dict[str, Any]],
    selector: dict[str, str],
) -> dict[str, Any]:
    return {
        "serviceAccountName": name,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 101,
            "runAsGroup": 101,
            "fsGroup": 101,
            "seccompProfile": {"type": "RuntimeDefault"},
            # Gateway listeners on ports below 1024 without any capability.
            "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
        },
        "terminationGracePeriodSeconds": provision.grace_period_seconds,
        # Replicas on different nodes where the cluster allows: one node lost, not all.
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": selector},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
        "containers": [
            _envoy_container(settings, provision, container_ports),
            _drain_container(provision),
        ],
        "volumes": [
            {"name": "bootstrap", "configMap": {"name": name}},
            {"name": "run", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "xds-tls", "secret": {"secretName": xds_secret, "defaultMode": 0o440}},
        ],
    }


def _envoy_container(
    settings: EnvoyProxySettings, provision: ProvisionSettings, ports: list[dict[str, Any]]
) -> dict[str, Any]:
    args = [
        "--config-path",
        f"{BOOTSTRAP_DIRECTORY}/bootstrap.yaml",
        "--service-node",
        "$(POD_NAME)",
        "--log-level",
        "info",
        "--drain-time-s",
        str(provision.drain_time_seconds),
        "--drain-strategy",
        "immediate",
    ]
    if settings.concurrency is not None:
        args += ["--concurrency", str(settings.concurrency)]
    # Bounded: the grace period ends the pod anyway.
    wait = provision.grace_period_seconds - 5
    return {
        "name": "envoy",
        "image": settings.image or DEFAULT_ENVOY_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["envoy"],
        "args": args,
        "lifecycle": {
            # Envoy exits at once on SIGTERM: wait for the drain container to drain it.
            "preStop": {
                "exec": {
                    "command": [
                        "/bin/sh",
                        "-c",
                        f"i=0; while [ ! -e {DRAINED_FILE} ] && [ $i -lt {wait} ]; "
                        "do sleep 1; i=$((i+1)); done",
                    ]
                }
            }
        },
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [*ports, {"name": "metrics", "containerPort": STATS_PORT, "protocol": "TCP"}],
        # Envoy's /ready answers 200 once its first configuration from dragoman is in
        # place (the listener binds only then), and 503 from the moment a drain starts.
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": "metrics"},
            "periodSeconds": 5,
            "failureThreshold": 2,
        },
        "resources": _resources(settings),
        "securityContext": _restricted(),
        "volumeMounts": [
            {"name": "bootstrap", "mountPath": BOOTSTRAP_DIRECTORY, "readOnly": True},
            {"name": "run", "mountPath": RUN_DIRECTORY},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "xds-tls", "mountPath": TLS_DIRECTORY, "readOnly": True},
        ],
    }


def _drain_container(provision: ProvisionSettings) -> dict[str, Any]:
    return {
        "name": "drain",
        "image": provision.drain_image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "drain",
            f"--admin-socket={ADMIN_SOCKET}",
            "--after-sigterm",
            f"--timeout={provision.drain_timeout_seconds}s",
            f"--done-file={DRAINED_FILE}",
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": _restricted(),
        "volumeMounts": [{"name": "run", "mountPath": RUN_DIRECTORY}],
    }


def _resources(settings: EnvoyProxySettings) -> dict[str, dict[str, str]]:
    if settings.resources is None:
        return {part: dict(values) for part, values in DEFAULT_RESOURCES.items()}
    return {part: dict(values) for part, values in settings.resources.items()}


def _restricted() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def max_unavailable(replicas: int) -> int:
    """The PodDisruptionBudget's maxUnavailable: a quarter of the replicas, at least one
    (a budget of zero would block every node drain)."""
    return max(1, math.floor(replicas / 4))
