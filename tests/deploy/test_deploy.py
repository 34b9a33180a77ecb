"""deploy/: every manifest validates offline against the Kubernetes schemas (strictly: no
unknown fields), and the pieces agree with each other and with dragoman itself: RBAC
grants exactly the verbs the code uses, the probes point at what serves them."""

from __future__ import annotations

import argparse
import asyncio
import datetime
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes import client

from dragoman.cli import _parser
from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
from dragoman.envoy.bootstrap.envoy_bootstrap import (
    XdsClientTls,
    bootstrap_yaml,
    xds_tls_secret_files,
)
from dragoman.kubernetes.certificate_secrets import write_secrets
from dragoman.kubernetes.leader import LeaderElector, LeaseClient, LeaseSettings
from dragoman.kubernetes.watched_kinds import WATCHED_KINDS
from dragoman.objects import BackendPolicy
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.sources.parse import parse_object
from dragoman.sources.parsers.backend_policy import SPEC_FIELDS
from tests.support.kubeapi import KubeApiServer
from tests.support.kustomize import kustomize
from tests.support.manifest_fuzzer import base_documents

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# 1.30: the oldest release with ValidatingAdmissionPolicy v1, which the Gateway API v1.6.1
# standard install needs; and the newest release kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.utils.latest_version())
# What the bootstrap ConfigMap holds (the command is quoted in deploy/04-envoy.yaml).
XDS_SERVICE = "dragoman.dragoman-system.svc.cluster.local:18000"
ADMIN_SOCKET = "/var/run/envoy/admin.sock"
ENVOY_TLS = XdsClientTls(
    trusted_ca="/etc/envoy/tls/ca.crt",
    certificate="/etc/envoy/tls/tls.crt",
    private_key="/etc/envoy/tls/tls.key",
    server_name="dragoman.dragoman-system.svc",
    sds_directory="/etc/envoy",
)
ENVOY_STATS_ADDRESS = "0.0.0.0:8002"


EXAMPLE_OVERLAY = DEPLOY.parent / "examples" / "kustomize"


def documents(directory: Path = DEPLOY) -> list[tuple[str, dict[str, Any]]]:
    return [(directory.name, doc) for doc in kustomize(directory)]


def test_the_base_lists_every_manifest_of_deploy() -> None:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present


def test_the_example_overlay_renders_valid_objects_with_the_prometheus_component() -> None:
    rendered = documents(EXAMPLE_OVERLAY)
    for _, doc in rendered:
        if not doc["apiVersion"].startswith(f"{GATEWAY_GROUP}/"):
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
    by_name = {(doc["kind"], doc["metadata"]["name"]): doc for _, doc in rendered}
    control = by_name[("Deployment", "dragoman")]["spec"]["template"]
    annotations = control["metadata"]["annotations"]
    [container] = control["spec"]["containers"]
    args = _parser().parse_args(container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert annotations["prometheus.io/port"] == str(ports["metrics"])
    assert annotations["prometheus.io/path"] == "/metrics"
    assert args.envoy_service == ("dragoman-system", "envoy")
    assert container["image"].startswith("registry.example.com/")
    envoy = by_name[("Deployment", "envoy")]["spec"]["template"]
    envoy_ports = {p["name"]: p["containerPort"] for p in envoy["spec"]["containers"][0]["ports"]}
    assert envoy["metadata"]["annotations"]["prometheus.io/path"] == "/stats/prometheus"
    assert envoy["metadata"]["annotations"]["prometheus.io/port"] == str(envoy_ports["metrics"])
    # The base alone carries no scrape annotations: the component is optional.
    base = {(d["kind"], d["metadata"]["name"]): d for _, d in documents()}
    assert "annotations" not in base[("Deployment", "dragoman")]["spec"]["template"]["metadata"]


def find(kind: str, name: str) -> dict[str, Any]:
    for _, doc in documents():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name} in deploy/")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_builtin_object_is_valid_strictly(version: str) -> None:
    checked = 0
    for filename, doc in documents():
        if doc["apiVersion"].startswith(f"{GATEWAY_GROUP}/"):
            continue  # not in the Kubernetes schemas: checked below
        where = f"{filename} {doc['kind']}/{doc['metadata']['name']}"
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            pytest.fail(f"{where}: {path}: {error.message}")
        checked += 1
    assert checked >= 10


def test_gateway_api_objects_are_read_by_dragoman_without_problems() -> None:
    gateway_api = [doc for _, doc in documents() if doc["apiVersion"].startswith(GATEWAY_GROUP)]
    assert [doc["kind"] for doc in gateway_api] == ["GatewayClass"]
    [gateway_class] = gateway_api
    parsed = parse_object(gateway_class)
    assert parsed is not None
    assert gateway_class["spec"]["controllerName"] == DEFAULT_CONTROLLER_NAME


def backend_policy_schema(*, closed: bool) -> dict[str, Any]:
    """The BackendPolicy CRD's schema; `closed`: with no field beyond those it names."""
    crd = find("CustomResourceDefinition", "backendpolicies.dragoman.dev")
    [version] = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and node is not schema:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    if closed:
        close(schema["properties"]["spec"])
    return schema


def test_the_backend_policy_crd_names_every_field_dragoman_reads() -> None:
    """The feature manifests' policies use every field: each one is in the schema (no field
    beyond it), and dragoman reads each without a problem."""
    schema = backend_policy_schema(closed=True)
    policies = [doc for doc in base_documents() if doc["kind"] == "BackendPolicy"]
    assert len(policies) >= 2
    for doc in policies:
        jsonschema.validate(doc, schema)
        parsed = parse_object(doc)
        assert isinstance(parsed, BackendPolicy) and not parsed.problems


def test_the_backend_policy_crd_and_dragomans_parser_know_the_same_fields() -> None:
    def tree(node: dict[str, Any]) -> dict[str, Any]:
        if node.get("type") == "array":
            node = node["items"]
        return {key: tree(value) for key, value in node.get("properties", {}).items()}

    spec = backend_policy_schema(closed=False)["properties"]["spec"]
    # sectionName: dragoman names it only to refuse it with its reason; the CRD has none.
    known = {**SPEC_FIELDS, "targetRefs": {"group": {}, "kind": {}, "name": {}}}
    assert tree(spec) == known


@pytest.mark.parametrize(
    "spec",
    [
        {"circuitBreaker": {"maxConnections": -1}},
        {"healthCheck": {"passive": {"interval": "10 seconds"}}},
        {"healthCheck": {"active": {"type": "UDP"}}},
        {"loadBalancer": {"type": "Fastest"}},
        {"healthCheck": {"panicThreshold": 101}},
    ],
)
def test_the_backend_policy_crd_refuses_what_dragoman_refuses(spec: dict[str, Any]) -> None:
    doc = {
        "apiVersion": "dragoman.dev/v1alpha1",
        "kind": "BackendPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "api"}], **spec},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, backend_policy_schema(closed=False))
    parsed = parse_object(doc)
    assert isinstance(parsed, BackendPolicy) and parsed.problems
    other_kind = {
        **doc,
        "spec": {"targetRefs": [{"group": "x.io", "kind": "Gateway", "name": "g"}]},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(other_kind, backend_policy_schema(closed=False))


def test_the_control_plane_command_line_is_one_dragoman_accepts() -> None:
    deployment = find("Deployment", "dragoman")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args = _parser().parse_args(container["args"])
    assert args.kubernetes and args.leader_election
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert args.xds_address.endswith(f":{ports['xds']}")
    assert args.metrics_address == f"0.0.0.0:{ports['metrics']}"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert deployment["spec"]["replicas"] == 2
    lease_rules = find("Role", "dragoman-leader-election")["rules"]
    assert [args.leader_election_name] in [r.get("resourceNames") for r in lease_rules]

    service = find("Service", "dragoman")
    assert service["spec"]["ports"][0]["targetPort"] == "xds"
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in XDS_SERVICE


def test_rbac_grants_what_dragoman_reads_and_writes_and_no_more() -> None:
    rules = find("ClusterRole", "dragoman")["rules"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    expected: dict[tuple[str, str], set[str]] = {}
    for kind in WATCHED_KINDS:
        verbs = {"list", "watch"}
        if kind.has_status:
            verbs.add("get")  # read right before a status write
            expected[(kind.group, f"{kind.plural}/status")] = {"update"}
        expected[(kind.group, kind.plural)] = verbs
    assert granted == expected


def test_the_lease_role_grants_every_verb_leader_election_uses_and_no_more() -> None:
    """Acquire, renew and release a Lease against the in-process API server and compare
    the verbs it saw with the Role's."""
    rules = find("Role", "dragoman-leader-election")["rules"]
    args = _parser().parse_args(
        find("Deployment", "dragoman")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    settings = LeaseSettings(
        identity="pod-a",
        name=args.leader_election_name,
        namespace="dragoman-system",
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.1,
    )
    with KubeApiServer() as api:
        api.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dragoman-system"}}
        )
        api_client = client.ApiClient(api.client_configuration())
        try:
            elector = LeaderElector(LeaseClient(api_client), settings)

            async def campaign() -> None:
                stop = asyncio.Event()
                task = asyncio.create_task(elector.run(stop, lambda leading: None))
                while not elector.is_leader:
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.3)  # a few renewals
                stop.set()
                await task  # releases the Lease

            asyncio.run(campaign())
        finally:
            api_client.close()
        used = {
            verb for (verb, resource), n in api.request_counts().items() if resource == "leases"
        }
    assert used == {"create", "get", "update"}
    # create cannot be limited by name in RBAC; everything else is, to our one Lease.
    by_names = {tuple(r.get("resourceNames") or ()): set(r["verbs"]) for r in rules}
    assert all(
        r["apiGroups"] == ["coordination.k8s.io"] and r["resources"] == ["leases"] for r in rules
    )
    assert by_names == {(): {"create"}, (settings.name,): used - {"create"}}


def envoy_bootstrap() -> dict[str, Any]:
    return yaml.safe_load(find("ConfigMap", "envoy-bootstrap")["data"]["bootstrap.yaml"])


def test_the_envoy_bootstrap_is_what_dragoman_bootstrap_prints_plus_readiness() -> None:
    deployed = envoy_bootstrap()
    listeners = deployed["static_resources"]["listeners"]
    [readiness] = [listener for listener in listeners if listener["name"] == "readiness"]
    listeners.remove(readiness)
    expected = bootstrap_yaml(
        XDS_SERVICE,
        node_id="envoy",
        node_cluster="dragoman",
        admin_socket=ADMIN_SOCKET,
        xds_tls=ENVOY_TLS,
        stats_address=ENVOY_STATS_ADDRESS,
    )
    assert deployed == yaml.safe_load(expected), (
        "regenerate with the command in deploy/04-envoy.yaml's header"
    )
    # The SDS files the bootstrap names, beside it in the ConfigMap (mounted at /etc/envoy).
    data = find("ConfigMap", "envoy-bootstrap")["data"]
    assert {name: data.get(name) for name in xds_tls_secret_files(ENVOY_TLS)} == (
        xds_tls_secret_files(ENVOY_TLS)
    )
    envoy = find("Deployment", "envoy")["spec"]["template"]
    assert envoy["metadata"]["labels"]["dragoman.dev/envoy"] == "true"
    container = _container(envoy, "envoy")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(ADMIN_SOCKET).parent) in mounts
    # The readiness probe asks the static listener, on the path its health check answers.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["readinessProbe"]["httpGet"]
    assert readiness["address"]["socket_address"]["port_value"] == ports[probe["port"]]
    [manager] = readiness["filter_chains"][0]["filters"]
    health = manager["typed_config"]["http_filters"][0]["typed_config"]
    assert health["headers"] == [{"name": ":path", "string_match": {"exact": probe["path"]}}]
    assert health["pass_through_mode"] is False
    # The readiness port is not one clients reach through the Service.
    service_ports = {p["targetPort"] for p in find("Service", "envoy")["spec"]["ports"]}
    assert probe["port"] not in service_ports


def _container(template: dict[str, Any], name: str) -> dict[str, Any]:
    [container] = [c for c in template["spec"]["containers"] if c["name"] == name]
    return container


def _envoy_args(container: dict[str, Any]) -> dict[str, str]:
    args = container["args"]
    return dict(zip(args[::2], args[1::2], strict=True))


def test_a_stopping_envoy_pod_drains_before_envoy_gets_sigterm() -> None:
    envoy = find("Deployment", "envoy")["spec"]
    template = envoy["template"]
    assert envoy["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    drain = _container(template, "drain")
    args = _parser().parse_args(drain["args"])
    assert args.command == "drain"
    assert args.admin_socket == Path(ADMIN_SOCKET)
    # A sidecar: it drains on the SIGTERM every container gets when the pod stops.
    assert args.after_sigterm
    envoy_container = _container(template, "envoy")
    # Envoy is held back by its preStop hook until the drain container's done file exists.
    hook = " ".join(envoy_container["lifecycle"]["preStop"]["exec"]["command"])
    assert f"[ ! -e {args.done_file} ]" in hook
    waits = int(hook.split("-lt ")[1].split(" ")[0])  # seconds, one `sleep 1` each
    # Both see the socket and the done file in the same volume.
    mounts = {
        c["name"]: {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        for c in (
            drain,
            envoy_container,
        )
    }
    directory = str(Path(ADMIN_SOCKET).parent)
    assert mounts["drain"][directory] == mounts["envoy"][directory]
    assert args.done_file.parent == Path(directory)
    # The drain fits in the hook's wait, which fits in the grace period; Envoy's listeners
    # stop accepting well before the drain's timeout.
    grace = template["spec"]["terminationGracePeriodSeconds"]
    assert args.timeout < waits < grace
    drain_time = int(_envoy_args(envoy_container)["--drain-time-s"])
    assert drain_time < args.timeout
    # The drain container runs as Envoy's user: the admin socket is Envoy's.
    assert "runAsUser" not in drain.get("securityContext", {})


CERTGEN_SECRETS = tuple(f"dragoman-xds-{stem}" for stem in ("ca", "server", "fleet", "admin"))


def _mounted_secrets(template: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Mount path → Secret name of each Secret volume the container mounts."""
    secrets = {
        v["name"]: v["secret"]["secretName"] for v in template["spec"]["volumes"] if "secret" in v
    }
    return {
        m["mountPath"]: secrets[m["name"]]
        for m in container["volumeMounts"]
        if m["name"] in secrets
    }


def _certgen_args() -> argparse.Namespace:
    [container] = find("Job", "dragoman-certgen")["spec"]["template"]["spec"]["containers"]
    return _parser().parse_args(container["args"])


def test_certificates_are_issued_at_install_and_renewed_daily() -> None:
    job = find("Job", "dragoman-certgen")["spec"]
    cron = find("CronJob", "dragoman-certgen")["spec"]
    # The same pod: what renews is what issued.
    assert cron["jobTemplate"]["spec"]["template"] == job["template"]
    args = _certgen_args()
    assert args.renew_before == datetime.timedelta(days=30)
    # A finished Job deletes itself: `kubectl apply -k` after an image change creates it
    # again rather than failing on its immutable pod template.
    assert job["ttlSecondsAfterFinished"] == 0
    assert cron["concurrencyPolicy"] == "Forbid"
    minute, hour, *every = cron["schedule"].split()
    assert every == ["*", "*", "*"] and minute.isdigit() and hour.isdigit()


def test_dragoman_and_envoy_mount_what_certgen_writes_and_use_it() -> None:
    certgen = _certgen_args()
    assert certgen.command == "certgen" and certgen.kubernetes
    assert certgen.namespace == "dragoman-system"

    deployment = find("Deployment", "dragoman")["spec"]["template"]
    [container] = deployment["spec"]["containers"]
    args = _parser().parse_args(container["args"])
    [(path, secret)] = _mounted_secrets(deployment, container).items()
    assert secret == "dragoman-xds-server" and secret in CERTGEN_SECRETS
    assert (args.xds_tls_cert, args.xds_tls_key, args.xds_tls_client_ca) == (
        Path(path) / "tls.crt",
        Path(path) / "tls.key",
        Path(path) / "ca.crt",
    )
    assert not args.xds_insecure
    # The name Envoy checks is one the server certificate carries.
    assert ENVOY_TLS.server_name in certgen.server_names
    assert XDS_SERVICE.rsplit(":", 1)[0] in certgen.server_names

    envoy = find("Deployment", "envoy")["spec"]["template"]
    envoy_container = _container(envoy, "envoy")
    [(envoy_path, envoy_secret)] = _mounted_secrets(envoy, envoy_container).items()
    assert envoy_secret == "dragoman-xds-fleet"
    assert ENVOY_TLS.certificate == f"{envoy_path}/tls.crt"
    # The key is readable by Envoy's group, and by nobody else.
    [volume] = [v for v in envoy["spec"]["volumes"] if "secret" in v]
    assert volume["secret"]["defaultMode"] == 0o440
    context = envoy["spec"]["securityContext"]
    assert context["fsGroup"] == context["runAsGroup"]


def test_the_certgen_role_grants_what_certgen_uses_and_no_more() -> None:
    """Run certgen twice (create, then keep) and once more after breaking a Secret (update)
    against the in-process API server; compare the verbs it used with the Role's."""
    rules = find("Role", "dragoman-certgen")["rules"]
    certgen = _certgen_args()
    with KubeApiServer() as api:
        api.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dragoman-system"}}
        )
        api_client = client.ApiClient(api.client_configuration())
        core = client.CoreV1Api(api_client)
        try:

            def run() -> dict[str, str]:
                return dict(
                    write_secrets(
                        certgen.namespace,
                        server_names=certgen.server_names,
                        gateways=certgen.gateway,
                        days=certgen.days,
                        api=core,
                    )
                )

            run()
            assert set(run().values()) == {"kept"}
            fleet = core.read_namespaced_secret("dragoman-xds-fleet", "dragoman-system")
            fleet.data["tls.crt"] = fleet.data["ca.crt"]
            core.replace_namespaced_secret("dragoman-xds-fleet", "dragoman-system", fleet)
            assert run()["dragoman-system/dragoman-xds-fleet"] == "written"
            names = {s.metadata.name for s in core.list_namespaced_secret("dragoman-system").items}
        finally:
            api_client.close()
        # Less the test's own read and update of the fleet Secret.
        own = {("get", "secrets"): 1, ("update", "secrets"): 1}
        used = {
            verb
            for (verb, resource), n in api.request_counts().items()
            if resource == "secrets" and n > own.get((verb, resource), 0)
        }
    assert used == {"list", "create", "update"}
    assert names == set(CERTGEN_SECRETS)
    by_names = {tuple(r.get("resourceNames") or ()): set(r["verbs"]) for r in rules}
    assert by_names == {(): {"list", "create"}, CERTGEN_SECRETS: {"update"}}
    assert all(r["apiGroups"] == [""] and r["resources"] == ["secrets"] for r in rules)
    subjects = find("RoleBinding", "dragoman-certgen")["subjects"]
    job = find("Job", "dragoman-certgen")["spec"]["template"]["spec"]
    account = job["serviceAccountName"]
    assert subjects == [{"kind": "ServiceAccount", "name": account, "namespace": "dragoman-system"}]
