"""`dragoman check` for CI pipelines, and the exit codes of check, render and status:
0 when every object is served as written, 1 when any is invalid or refused (check only),
2 on usage errors."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from dragoman.runtime.server_config import load_config

GATEWAY = """
    apiVersion: gateway.networking.k8s.io/v1
    kind: Gateway
    metadata: {name: edge, namespace: default}
    spec:
      gatewayClassName: dragoman
      listeners: [{name: http, protocol: HTTP, port: 8080}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec: {selector: {app: web}, ports: [{port: 80}]}
    """
ROUTE = """
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: shop, namespace: default}
    spec:
      parentRefs: [{name: edge}]
      rules: [{backendRefs: [{name: BACKEND, port: 80}]}]
    """
SNEAKY = """
    apiVersion: v1
    kind: Service
    metadata: {name: sneaky, namespace: default}
    spec: {type: ExternalName, externalName: localhost, ports: [{port: 80}]}
    """


def dragoman(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dragoman", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def directory(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name.replace("_", ".")).write_text(textwrap.dedent(text))
    return tmp_path


def test_a_valid_directory_passes(tmp_path: Path) -> None:
    manifests = directory(
        tmp_path, gateway_yaml=GATEWAY, route_yaml=ROUTE.replace("BACKEND", "web")
    )
    result = dragoman("check", "--manifests", str(manifests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "ok: 3 objects in 2 files" in result.stderr


def test_a_refused_backend_fails_naming_file_object_field_and_reason(tmp_path: Path) -> None:
    manifests = directory(
        tmp_path,
        gateway_yaml=GATEWAY,
        route_yaml=ROUTE.replace("BACKEND", "sneaky"),
        sneaky_yaml=SNEAKY,
    )
    result = dragoman("check", "--manifests", str(manifests))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        # At the backendRef itself: line 7, `rules: [{backendRefs: [{name: sneaky, ...`.
        "route.yaml:7:26: HTTPRoute/default/shop: spec.rules[0].backendRefs[0]: Service "
        "default/sneaky: externalName 'localhost' points to localhost (UnsafeExternalName)"
    ]
    assert "1 problems; 4 objects in 3 files" in result.stderr


def test_an_invalid_object_fails_naming_its_field(tmp_path: Path) -> None:
    broken = ROUTE.replace("BACKEND", "web").replace("port: 80", "port: 0")
    manifests = directory(tmp_path, gateway_yaml=GATEWAY, route_yaml=broken)
    result = dragoman("check", "--manifests", str(manifests))
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if line.startswith("route.yaml")]
    assert "HTTPRoute/default/shop" in line and "spec.rules[0].backendRefs[0].port" in line


@pytest.mark.parametrize(
    "content",
    [b"kind: [unclosed\n", b"\xff\xfe not text", b"{{a: b}}: c\n"],
    ids=["yaml", "encoding", "mapping-key"],
)
def test_an_unreadable_file_fails(tmp_path: Path, content: bytes) -> None:
    directory(tmp_path, gateway_yaml=GATEWAY)
    (tmp_path / "bad.yaml").write_bytes(content)
    result = dragoman("check", "--manifests", str(tmp_path))
    assert result.returncode == 1
    assert result.stdout.startswith("bad.yaml: ")


@pytest.mark.parametrize("command", ["check", "render", "status"])
def test_usage_errors_exit_2_and_valid_runs_exit_0(command: str, tmp_path: Path) -> None:
    assert dragoman(command, "--manifests", str(tmp_path / "missing")).returncode == 2
    assert dragoman(command, "--manifests", str(tmp_path), "--no-such-flag").returncode == 2
    config = tmp_path / "config.yaml"
    config.write_text("accessLog: {format: xml}\n")
    bad = dragoman(command, "--manifests", str(tmp_path), "--config", str(config))
    assert bad.returncode == 2
    assert "accessLog.format" in bad.stderr
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    directory(manifests, gateway_yaml=GATEWAY)
    assert dragoman(command, "--manifests", str(manifests)).returncode == 0


def test_status_shows_the_gateway_addresses(tmp_path: Path) -> None:
    directory(tmp_path, gateway_yaml=GATEWAY)
    result = dragoman(
        "status",
        "--manifests",
        str(tmp_path),
        "--gateway-address",
        "203.0.113.10",
        "--gateway-address",
        "gw.example.com",
        "-o",
        "json",
    )
    assert result.returncode == 0, result.stderr
    [gateway] = [o for o in yaml.safe_load(result.stdout)["items"] if o["kind"] == "Gateway"]
    assert gateway["status"]["addresses"] == [
        {"type": "IPAddress", "value": "203.0.113.10"},
        {"type": "Hostname", "value": "gw.example.com"},
    ]
    refused = dragoman("status", "--manifests", str(tmp_path), "--gateway-address", "not_a_host")
    assert refused.returncode == 2 and "--gateway-address" in refused.stderr


def test_the_example_manifests_with_the_demo_config_have_only_the_refusal_they_show() -> None:
    root = Path(__file__).resolve().parents[2]
    manifests, config = root / "examples" / "manifests", root / "examples" / "demo-config.yaml"
    # The demo writes the same exception for itself; the file must say what the demo runs.
    assert [str(n) for n in load_config(config).endpoint_networks] == ["127.0.0.0/8"]

    without = run_check(manifests)
    assert without.returncode == 1
    assert "DeniedEndpointAddress" in without.stdout

    checked = run_check(manifests, "--config", str(config))
    # The one refusal is the demo's point: an ExternalName to localhost answers 500.
    assert checked.returncode == 1
    [line] = checked.stdout.splitlines()
    assert "Service default/sneaky" in line and "(UnsafeExternalName)" in line


def run_check(manifests: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dragoman", "check", "--manifests", str(manifests), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_files_directories_and_standard_input_are_read_as_a_directory_is(tmp_path: Path) -> None:
    manifests = directory(tmp_path, gateway_yaml=GATEWAY)
    route = tmp_path / "elsewhere.yml"
    route.write_text(textwrap.dedent(ROUTE.replace("BACKEND", "web")))
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "check", str(manifests / "gateway.yaml"), "-"],
        input=textwrap.dedent(ROUTE.replace("BACKEND", "web")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: 3 objects in 2 files" in result.stderr
    both = dragoman("check", str(manifests), "--manifests", str(manifests))
    assert both.returncode == 1
    assert "first definition wins" in both.stdout


def test_a_problem_in_standard_input_is_named_by_dash(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "check", "-"],
        input="---".join(
            textwrap.dedent(t) for t in (GATEWAY, ROUTE.replace("BACKEND", "sneaky"), SNEAKY)
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    # The route is the second document (from line 14); its backendRef is on line 19.
    assert result.stdout.startswith("-:19:26: HTTPRoute/default/shop: spec.rules[0].backendRefs[0]")


def test_no_manifests_named_is_a_usage_error() -> None:
    result = dragoman("check")
    assert result.returncode == 2
    assert "--manifests DIR" in result.stderr
    assert dragoman("check", "-", "-").returncode == 2


def test_a_missing_file_is_a_problem_named_by_its_path(tmp_path: Path) -> None:
    result = dragoman("check", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert f"{tmp_path / 'nope.yaml'}: cannot read" in result.stdout


def test_render_reads_standard_input_as_a_file() -> None:
    text = "---".join(textwrap.dedent(t) for t in (GATEWAY, ROUTE.replace("BACKEND", "web")))
    run = [sys.executable, "-m", "dragoman", "render"]
    from_stdin = subprocess.run(
        [*run, "-"], input=text, capture_output=True, text=True, timeout=60, check=True
    )
    assert "default/web" in from_stdin.stdout


def test_json_output_places_every_problem_in_its_file(tmp_path: Path) -> None:
    import json

    broken = ROUTE.replace("BACKEND", "web").replace("port: 80", "port: 0")
    manifests = directory(
        tmp_path, gateway_yaml=GATEWAY, route_yaml=broken, bad_yaml="kind: [unclosed\n"
    )
    result = dragoman("check", "-o", "json", str(manifests / "gateway.yaml"), str(manifests))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    by_file = {p["file"]: p for p in report["problems"]}
    route = by_file[f"{manifests}/route.yaml"]
    assert route == {
        "severity": "error",
        "file": f"{manifests}/route.yaml",
        "line": 7,  # the `port` key of `rules: [{backendRefs: [{name: web, port: 0}]}]`
        "column": 38,
        "object": "HTTPRoute/default/shop",
        "field": "spec.rules[0].backendRefs[0].port",
        "message": route["message"],
        "reason": "",
    }
    assert "0" in route["message"]
    # The gateway file named twice: its objects keep the first definition, a problem each.
    twice = [p for p in report["problems"] if "first definition wins" in p["message"]]
    assert {(p["file"], p["line"], p["column"]) for p in twice} == {
        (f"{manifests}/gateway.yaml", 2, 1),
        (f"{manifests}/gateway.yaml", 9, 1),
    }
    assert by_file[f"{manifests}/bad.yaml"]["line"] is None  # the message says where
    assert report["errors"] == len(report["problems"]) and report["warnings"] == 0


def test_json_output_of_a_valid_file_lists_no_problem(tmp_path: Path) -> None:
    import json

    manifests = directory(tmp_path, gateway_yaml=GATEWAY)
    result = dragoman("check", "--output", "json", str(manifests / "gateway.yaml"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "problems": [],
        "errors": 0,
        "warnings": 0,
        "objects": 2,
        "files": 1,
    }


def test_a_misspelled_kind_is_a_warning_that_says_which_kind_was_meant(tmp_path: Path) -> None:
    import json

    typo = ROUTE.replace("BACKEND", "web").replace("kind: HTTPRoute", "kind: HTTPRoutes")
    manifests = directory(tmp_path, gateway_yaml=GATEWAY, route_yaml=typo)
    result = dragoman("check", str(manifests))
    assert result.returncode == 0, result.stdout + result.stderr  # a warning does not fail
    assert result.stdout.splitlines() == [
        f"{manifests}/route.yaml:3:1: warning: HTTPRoutes/default/shop: kind: dragoman reads "
        "no kind HTTPRoutes in gateway.networking.k8s.io; this object is ignored. Did you "
        "mean HTTPRoute?"
    ]
    assert "ok: 2 objects in 2 files, 1 warnings" in result.stderr
    report = json.loads(dragoman("check", "-o", "json", str(manifests)).stdout)
    [warning] = report["problems"]
    assert warning["severity"] == "warning" and warning["field"] == "kind"
    assert (warning["line"], warning["column"]) == (3, 1)  # the `kind` key
    assert report["warnings"] == 1 and report["errors"] == 0


def position_of(text: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """(line, column), from 1, of the `occurrence`th `needle` in `text`."""
    index = -1
    for _ in range(occurrence + 1):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index)
    return line + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def test_json_multi_document_and_list_files_place_each_problem_at_its_field(
    tmp_path: Path,
) -> None:
    import json

    route = yaml.safe_load(textwrap.dedent(ROUTE.replace("BACKEND", "web")))
    route["spec"]["rules"][0]["backendRefs"][0]["port"] = 0
    as_json = json.dumps(route, indent="\t")  # tabs: valid JSON, not valid YAML
    # Several documents: the second's backendRef lacks its name (placed at the backendRef).
    nameless = ROUTE.replace("name: shop", "name: other").replace("name: BACKEND, ", "")
    several = textwrap.dedent(GATEWAY) + "---" + textwrap.dedent(nameless)
    listed = textwrap.dedent("""\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Service
          metadata: {name: fine}
          spec: {ports: [{port: 80}]}
        - apiVersion: v1
          kind: Service
          metadata: {name: broken}
          spec:
            ports:
            - port: 80
              protocol: FTP
        """)
    (tmp_path / "route.json").write_text(as_json)
    (tmp_path / "several.yaml").write_text(several)
    (tmp_path / "listed.yaml").write_text(listed)
    result = dragoman("check", "-o", "json", "--manifests", str(tmp_path))
    assert result.returncode == 1, result.stderr
    placed = {
        p["file"]: (p["field"], p["line"], p["column"])
        for p in json.loads(result.stdout)["problems"]
    }
    assert placed == {
        "route.json": ("spec.rules[0].backendRefs[0].port", *position_of(as_json, '"port"')),
        "several.yaml": (
            "spec.rules[0].backendRefs[0].name",
            *position_of(several, "{port: 80}", 1),  # the route's, not the Service's
        ),
        "listed.yaml": ("spec.ports[0].protocol", *position_of(listed, "protocol")),
    }
    text = dragoman("check", "--manifests", str(tmp_path)).stdout
    line, column = position_of(listed, "protocol")
    assert f"listed.yaml:{line}:{column}: Service/default/broken: spec.ports[0].protocol: " in text


def test_standard_input_is_placed_at_its_fields_in_json_output() -> None:
    import json

    text = "---".join(
        textwrap.dedent(t) for t in (GATEWAY, ROUTE.replace("BACKEND", "web"), SNEAKY)
    ).replace("port: 80}]}]", "port: 70000}]}]")
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "check", "-o", "json", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert (problem["file"], problem["line"], problem["column"]) == (
        "-",
        *position_of(text, "port: 70000"),
    )
    assert problem["field"] == "spec.rules[0].backendRefs[0].port"


def test_a_file_changed_since_it_was_loaded_keeps_the_start_of_its_document(
    tmp_path: Path,
) -> None:
    from dragoman.commands.check_report import check_problems
    from dragoman.sources.paths import load_paths

    broken = textwrap.dedent(ROUTE.replace("BACKEND", "web").replace("port: 80", "port: 0"))
    path = tmp_path / "route.yaml"
    path.write_text(broken)
    result = load_paths([str(path)], io.BytesIO())
    [fresh] = check_problems(result, [], lambda _: path.read_bytes())
    assert (fresh.line, fresh.column) == position_of(broken, "port: 0")
    [moved] = check_problems(result, [], lambda _: b"\n\n" + path.read_bytes())
    assert (moved.line, moved.column) == (2, 1)
    [unread] = check_problems(result, [], lambda _: None)
    assert (unread.line, unread.column) == (2, 1)
    [unread] = check_problems(result, [])
    assert (unread.line, unread.column) == (2, 1)


def test_a_reference_to_a_missing_object_says_which_existing_name_was_likely_meant(
    tmp_path: Path,
) -> None:
    misspelled = ROUTE.replace("BACKEND", "wbe").replace("{name: edge}", "{name: egde}")
    far = ROUTE.replace("name: shop", "name: far").replace("BACKEND", "unrelated")
    manifests = directory(tmp_path, gateway_yaml=GATEWAY, route_yaml=misspelled, far_yaml=far)
    result = dragoman("check", "--manifests", str(manifests))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    parent, backend = (
        position_of(textwrap.dedent(misspelled), s) for s in ("{name: egde}", "{name: wbe")
    )
    assert (
        f"route.yaml:{parent[0]}:{parent[1]}: HTTPRoute/default/shop: spec.parentRefs[0]: "
        "Gateway default/egde not found; did you mean edge? (NoMatchingParent)"
    ) in lines
    assert (
        f"route.yaml:{backend[0]}:{backend[1]}: HTTPRoute/default/shop: "
        "spec.rules[0].backendRefs[0]: Service default/wbe not found; did you mean web? "
        "(BackendNotFound)"
    ) in lines
    [unrelated] = [line for line in lines if "default/unrelated" in line]
    assert unrelated.endswith("Service default/unrelated not found (BackendNotFound)")


@pytest.mark.parametrize("typo", ["HTTPRoutes", "HttpRoute", "httproute", "HTTPRoue"])
def test_a_misspelled_kind_names_the_kind_meant_in_json_output(tmp_path: Path, typo: str) -> None:
    import json

    route = ROUTE.replace("BACKEND", "web").replace("kind: HTTPRoute", f"kind: {typo}")
    manifests = directory(tmp_path, gateway_yaml=GATEWAY, route_yaml=route)
    report = json.loads(dragoman("check", "-o", "json", str(manifests / "route.yaml")).stdout)
    [warning] = report["problems"]
    assert warning["message"].endswith("Did you mean HTTPRoute?")
    assert (warning["field"], warning["line"], warning["column"]) == ("kind", 3, 1)


def test_a_misspelled_field_is_a_warning_at_its_key_naming_the_field_meant(
    tmp_path: Path,
) -> None:
    import json

    typo = ROUTE.replace("BACKEND", "web").replace("rules: [{backendRefs", "rules: [{backendRef")
    text = textwrap.dedent(GATEWAY) + "---" + textwrap.dedent(typo)
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "check", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr  # a warning does not fail
    line, column = position_of(text, "backendRef:")
    assert result.stdout.splitlines() == [
        f"-:{line}:{column}: warning: HTTPRoute/default/shop: spec.rules[0].backendRef: "
        "dragoman knows no such field of HTTPRoute: ignored; did you mean backendRefs?"
    ]
    as_json = json.dumps(yaml.safe_load(textwrap.dedent(typo)), indent=2)
    (tmp_path / "route.json").write_text(as_json)
    (tmp_path / "gateway.yaml").write_text(textwrap.dedent(GATEWAY))
    report = json.loads(dragoman("check", "-o", "json", str(tmp_path)).stdout)
    [warning] = report["problems"]
    assert warning["severity"] == "warning" and warning["field"] == "spec.rules[0].backendRef"
    assert (warning["line"], warning["column"]) == position_of(as_json, '"backendRef"')
    assert warning["message"].endswith("did you mean backendRefs?")


@pytest.mark.parametrize(
    ("kind", "api_version", "spec"),
    [
        ("BackendPolicy", "dragoman.dev/v1alpha1", "circuitBreaker: {maxConnections: 10}"),
        (
            "XBackendTrafficPolicy",
            "gateway.networking.x-k8s.io/v1alpha1",
            "retryConstraint: {budget: {percent: 20}}",
        ),
    ],
)
def test_a_policy_targeting_a_missing_service_names_the_service_likely_meant(
    tmp_path: Path, kind: str, api_version: str, spec: str
) -> None:
    policy = f"""
        apiVersion: {api_version}
        kind: {kind}
        metadata: {{name: limits, namespace: default}}
        spec:
          targetRefs: [{{group: "", kind: Service, name: webb}}]
          {spec}
        """
    manifests = directory(tmp_path, gateway_yaml=GATEWAY, policy_yaml=policy)
    result = dragoman("check", "--manifests", str(manifests))
    assert result.returncode == 1
    line, column = position_of(textwrap.dedent(policy), "{group")
    assert result.stdout.splitlines() == [
        f"policy.yaml:{line}:{column}: {kind}/default/limits: spec.targetRefs[0]: "
        "Service default/webb does not exist; did you mean web? (TargetNotFound)"
    ]


def test_a_misspelled_api_group_names_the_api_version_meant(tmp_path: Path) -> None:
    typo = ROUTE.replace("BACKEND", "web").replace("networking.k8s.io", "networking.k8s.oi")
    manifests = directory(tmp_path, gateway_yaml=GATEWAY, route_yaml=typo)
    result = dragoman("check", str(manifests / "route.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"{manifests}/route.yaml:2:1: warning: HTTPRoute/default/shop: apiVersion: dragoman "
        "reads no HTTPRoute in gateway.networking.k8s.oi; this object is ignored. Did you mean "
        "gateway.networking.k8s.io/v1?"
    ]
    knative = ROUTE.replace("gateway.networking.k8s.io/v1", "serving.knative.dev/v1")
    (manifests / "route.yaml").write_text(textwrap.dedent(knative.replace("HTTPRoute", "Service")))
    assert dragoman("check", str(manifests / "route.yaml")).stdout == ""
