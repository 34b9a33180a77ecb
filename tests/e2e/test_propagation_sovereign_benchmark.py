"""benchmarks/propagation.py --compare-sovereign: the workload it gives sovereign is the one
dragoman serves, and the real Envoy accepts it. sovereign itself is not needed (nor
installed) here: its templates are plain Python functions, run in this process."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.support.envoy_checks import validate
from tests.support.envoy_dags import envoy_binary

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def comparison() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))  # the comparison imports propagation.py beside it
    try:
        import propagation_sovereign

        yield propagation_sovereign
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_sovereign_templates_make_what_dragoman_renders(
    comparison: ModuleType, tmp_path: Path
) -> None:
    assert comparison.equivalence_problems(tmp_path / "same") == []


def test_a_template_that_drifts_from_dragoman_is_reported(
    comparison: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drifted = comparison.TEMPLATES.replace('"dns_refresh_rate": "30s"', '"dns_refresh_rate": "5s"')
    assert drifted != comparison.TEMPLATES
    monkeypatch.setattr(comparison, "TEMPLATES", drifted)
    problems = comparison.equivalence_problems(tmp_path / "drifted")
    assert [problem.split(":")[0] for problem in problems] == ["clusters"]


def test_a_change_moves_one_service_to_the_other_port(
    comparison: ModuleType, tmp_path: Path
) -> None:
    workload = comparison.SovereignWorkload(tmp_path, 4, 10080, (10081, 10082), 1.0)
    environment = workload.write_all(10090, 3)
    assert environment["SOVEREIGN_PORT"] == "10090"
    assert environment["SOVEREIGN_WORKERS"] == "3"
    config = yaml.safe_load(
        Path(environment["SOVEREIGN_CONFIG"].removeprefix("file://")).read_text()
    )
    assert config["sources"][0]["config"]["spec"]["path"] == str(workload.source)

    assert workload.change(2) == 10082
    ports = {i["name"]: i["port"] for i in json.loads(workload.source.read_text())}
    assert ports == {"svc0": 10081, "svc1": 10081, "svc2": 10082, "svc3": 10081}
    assert workload.change(2) == 10081
    assert not list(tmp_path.glob(".*.tmp"))  # written aside, then renamed over the source


def test_envoy_accepts_the_sovereign_bootstrap_and_resources(
    comparison: ModuleType, tmp_path: Path
) -> None:
    workload = comparison.SovereignWorkload(tmp_path / "work", 3, 10080, (10081, 10082), 1.0)
    workload.write_all(10090, None)
    resources = workload.render()
    bootstrap = comparison.sovereign_bootstrap(0, tmp_path / "admin.sock", 10090, 10053, 1.0)
    # The listener as served (its routes over REST from sovereign)...
    bootstrap["static_resources"]["clusters"] += resources["clusters"]
    bootstrap["static_resources"]["listeners"] = resources["listeners"]
    served = tmp_path / "served.yaml"
    served.write_text(yaml.safe_dump(bootstrap))
    validate(envoy_binary(), served)
    # ...and with the route configuration sovereign serves inline, so Envoy checks it too.
    inline = copy.deepcopy(bootstrap)
    manager = inline["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    del manager["typed_config"]["rds"]
    manager["typed_config"]["route_config"] = resources["routes"][0]
    inline["dynamic_resources"] = {}
    with_routes = tmp_path / "with-routes.yaml"
    with_routes.write_text(yaml.safe_dump(inline))
    validate(envoy_binary(), with_routes)
    rest = bootstrap["dynamic_resources"]["cds_config"]["api_config_source"]
    assert (rest["api_type"], rest["refresh_delay"]) == ("REST", "1.0s")
