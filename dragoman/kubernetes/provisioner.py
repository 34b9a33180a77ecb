"""Makes in the cluster what provisioning planned (dragoman.provisioning): each Gateway's
objects created or updated by server-side apply (field manager `dragoman`, so fields others
set, such as a Service's clusterIP, stay theirs), and the objects of Gateways that are gone
deleted. What stops a Gateway's provisioning (a name another object holds, a permission
dragoman lacks) is its `dragoman.dev/Provisioned` condition; a Gateway whose objects are
not all its own changes nothing. Blocking: the runtime calls it in a thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dragoman.kubernetes.client_errors import describe_error
from dragoman.kubernetes.gateway_certificates import CertificateUnavailable, Signer
from dragoman.objects import ObjectKey
from dragoman.provisioning.names import GATEWAY_NAME_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from dragoman.provisioning.plan import PROVISIONED, PROVISIONED_KINDS, GatewayPlan

FIELD_MANAGER = "dragoman"
PLURALS = {
    "ServiceAccount": "serviceaccounts",
    "ConfigMap": "configmaps",
    "Deployment": "deployments",
    "Service": "services",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Secret": "secrets",
}
# The kind of each Gateway's xDS Secret, when dragoman issues its certificate.
ISSUED_SECRET_KIND = ("v1", "Secret")


class ProvisionRefused(Exception):
    """The API server refused a request for a reason the Gateway's condition gives."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ObjectClient:
    """Reads, applies and deletes objects of the provisioned kinds, as raw JSON."""

    def __init__(self, client: Any, request_timeout: float = 10.0) -> None:
        self.client = client
        self.timeout = request_timeout

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self._call("GET", _path(api_version, kind, namespace, name))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        metadata = obj["metadata"]
        path = _path(obj["apiVersion"], obj["kind"], metadata["namespace"], metadata["name"])
        return self._call(
            "PATCH",
            path,
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=dict(obj),
            content_type="application/apply-patch+yaml",
        )

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._call("DELETE", _path(api_version, kind, namespace, name))
        except ApiException as error:
            if error.status != 404:
                raise

    def list_all(self, api_version: str, plural: str) -> list[dict[str, Any]] | None:
        """Every object of a resource, in every namespace; None when it is not served."""
        from kubernetes.client.exceptions import ApiException

        try:
            items: list[dict[str, Any]] = self._call("GET", f"{_prefix(api_version)}/{plural}").get(
                "items", []
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return items

    def managed(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        """Every object of `kind` dragoman provisioned, in every namespace."""
        group = _prefix(api_version)
        path = f"{group}/{PLURALS[kind]}"
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{GATEWAY_NAME_LABEL}"
        items: list[dict[str, Any]] = self._call(
            "GET", path, query=[("labelSelector", selector)]
        ).get("items", [])
        return items

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        serialized = self.client.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.client.call_api(*serialized, _request_timeout=self.timeout)
        data = response.read()
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response)
        return json.loads(data) if data else {}


def _prefix(api_version: str) -> str:
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


def _path(api_version: str, kind: str, namespace: str, name: str) -> str:
    return f"{_prefix(api_version)}/namespaces/{namespace}/{PLURALS[kind]}/{name}"


@dataclass(frozen=True, slots=True)
class ProvisionOutcome:
    gateway: ObjectKey
    condition: dict[str, Any]  # dragoman.dev/Provisioned, without its time
    addresses: tuple[dict[str, str], ...] = ()  # for the Gateway's status.addresses
    # Refused part way, with objects this attempt created deleted again: tried again at the
    # next resync, not after every build (each try creates and deletes them anew).
    rolled_back: bool = False


def provision(
    client: ObjectClient, plan: GatewayPlan, gateway_uid: str, signer: Signer | None = None
) -> ProvisionOutcome:
    """Apply one plan: every object, once none is held by something else; first the xDS
    Secret, issued with `signer` when the plan says dragoman issues it and the pair in
    place is not good enough. A refusal part way removes again what this attempt created
    (an object there before keeps what was applied to it) and the condition says so."""
    if plan.problems:
        return ProvisionOutcome(plan.gateway, plan.condition())
    try:
        current = _current(client, plan, gateway_uid)
        objects = list(plan.objects)
        if plan.issued_secret is not None:
            if signer is None:
                raise CertificateUnavailable("no CA to issue the xDS certificate with")
            data = signer.secret_data(current.get(plan.issued_secret["kind"]), plan.identity)
            if data is not None:
                objects.insert(0, {**plan.issued_secret, "data": data})
    except ProvisionRefused as refused:
        return ProvisionOutcome(plan.gateway, _failed(plan, refused.reason, str(refused)))
    except CertificateUnavailable as unavailable:
        return ProvisionOutcome(
            plan.gateway, _failed(plan, "CertificateUnavailable", str(unavailable))
        )
    except Exception as error:  # the client's ApiException, or the connection's
        return ProvisionOutcome(plan.gateway, _failed(plan, _reason(error), describe_error(error)))
    applied: dict[str, dict[str, Any]] = {}
    for obj in objects:
        try:
            applied[obj["kind"]] = client.apply(obj)
        except Exception as error:  # the client's ApiException, or the connection's
            done = [o for o in objects if o["kind"] in applied]
            message, rolled_back = _partial(client, obj, error, done, current)
            condition = _failed(plan, _reason(error), message)
            return ProvisionOutcome(plan.gateway, condition, rolled_back=rolled_back)
    return ProvisionOutcome(
        plan.gateway, plan.condition(), service_addresses(applied.get("Service", {}))
    )


def _current(
    client: ObjectClient, plan: GatewayPlan, gateway_uid: str
) -> dict[str, dict[str, Any] | None]:
    """Each object of the plan as it is in the cluster (None: absent), by kind; raises
    ProvisionRefused when one is there and not the Gateway's."""
    wanted = list(plan.objects)
    if plan.issued_secret is not None:
        wanted.insert(0, plan.issued_secret)
    current = {}
    for obj in wanted:
        metadata = obj["metadata"]
        found = client.get(obj["apiVersion"], obj["kind"], metadata["namespace"], metadata["name"])
        if found is not None and not owned_by(found, gateway_uid):
            raise ProvisionRefused(
                "NameConflict",
                f"{obj['kind']} {metadata['namespace']}/{metadata['name']} exists and is not "
                "this Gateway's: nothing is provisioned until it is renamed or removed",
            )
        current[obj["kind"]] = found
    return current


def _partial(
    client: ObjectClient,
    refused: Mapping[str, Any],
    error: BaseException,
    applied: Sequence[Mapping[str, Any]],
    current: Mapping[str, dict[str, Any] | None],
) -> tuple[str, bool]:
    """What a refusal part way left: the objects this attempt created are deleted again
    (last first), so no half-made set serves (a Deployment without its Service, a Service
    with no pods); those there before keep what was applied to them. Returns the message,
    and whether anything was deleted."""
    message = f"{_named(refused)} refused: {describe_error(error)}"
    kept = [_named(obj) for obj in applied if current.get(obj["kind"]) is not None]
    removed, left = [], []
    for obj in reversed(applied):
        if current.get(obj["kind"]) is not None:
            continue
        metadata = obj["metadata"]
        try:
            client.delete(obj["apiVersion"], obj["kind"], metadata["namespace"], metadata["name"])
            removed.append(_named(obj))
        except Exception as failure:  # the client's ApiException, or the connection's
            left.append(f"{_named(obj)} ({describe_error(failure)})")
    if kept:
        message += f"; updated before it and kept: {', '.join(kept)}"
    if removed:
        message += f"; created before it and deleted again: {', '.join(removed)}"
    if left:
        message += f"; created before it and not deleted: {', '.join(left)}"
    if not applied:
        message += "; nothing was changed"
    return message, bool(removed)


def _named(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    return f"{obj['kind']} {metadata['namespace']}/{metadata['name']}"


def _reason(error: BaseException) -> str:
    return "Forbidden" if getattr(error, "status", None) == 403 else "ProvisioningFailed"


def _failed(plan: GatewayPlan, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": PROVISIONED,
        "status": "False",
        "reason": reason,
        "message": message,
        "observedGeneration": plan.generation,
    }


def owned_by(obj: Mapping[str, Any], gateway_uid: str) -> bool:
    references = obj.get("metadata", {}).get("ownerReferences") or []
    return any(ref.get("kind") == "Gateway" and ref.get("uid") == gateway_uid for ref in references)


def prune(
    client: ObjectClient,
    gateway_uids: Mapping[tuple[str, str], str],
    kinds: Sequence[tuple[str, str]] = PROVISIONED_KINDS,
) -> list[str]:
    """Delete what dragoman provisioned for Gateways that are gone (`gateway_uids`: the uid
    of each Gateway there is, by namespace and name; one of the same name with another uid
    is another Gateway). The cluster's garbage collector does it too, the objects being
    owned by their Gateway; this does it without waiting for it, and where there is none
    (the fake API server of the tests). `kinds`: those to look at, deleted last first.
    Returns what was deleted."""
    deleted = []
    for api_version, kind in reversed(kinds):
        for obj in client.managed(api_version, kind):
            metadata = obj["metadata"]
            gateway = metadata.get("labels", {}).get(GATEWAY_NAME_LABEL, "")
            uid = gateway_uids.get((metadata["namespace"], gateway))
            if uid is not None and owned_by(obj, uid):
                continue
            client.delete(api_version, kind, metadata["namespace"], metadata["name"])
            deleted.append(f"{kind}/{metadata['namespace']}/{metadata['name']}")
    return deleted


def service_addresses(service: Mapping[str, Any]) -> tuple[dict[str, str], ...]:
    """The Gateway's status.addresses from its Service: the load balancer's addresses once
    it has them, else the cluster IP (of a ClusterIP or NodePort Service)."""
    spec, status = service.get("spec", {}), service.get("status", {})
    ingress = status.get("loadBalancer", {}).get("ingress") or []
    addresses = []
    for entry in ingress:
        if entry.get("ip"):
            addresses.append({"type": "IPAddress", "value": entry["ip"]})
        elif entry.get("hostname"):
            addresses.append({"type": "Hostname", "value": entry["hostname"]})
    if not addresses and spec.get("type") != "LoadBalancer":
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            addresses.append({"type": "IPAddress", "value": cluster_ip})
    return tuple(addresses)


def provision_all(
    client: ObjectClient,
    plans: Sequence[GatewayPlan],
    gateway_uids: Mapping[ObjectKey, str],
    signer: Signer | None = None,
) -> list[ProvisionOutcome]:
    """Every plan applied, then the objects of Gateways gone pruned (`gateway_uids`: every
    Gateway there is, planned or not: those of another controller keep their objects)."""
    outcomes = [
        provision(client, plan, gateway_uids.get(plan.gateway, ""), signer) for plan in plans
    ]
    kinds = pruned_kinds(signer is not None)
    prune(client, {(key.namespace, key.name): uid for key, uid in gateway_uids.items()}, kinds)
    return outcomes


def pruned_kinds(issuing: bool) -> tuple[tuple[str, str], ...]:
    """The kinds provisioned, with the xDS Secret (deleted last) when dragoman issues it."""
    return (ISSUED_SECRET_KIND, *PROVISIONED_KINDS) if issuing else PROVISIONED_KINDS
