"""deploy/components/certificate-alerts: a PrometheusRule that renders with the base, whose
expression names only metrics dragoman exposes, and fires when the soonest certificate
expiry is under 14 days (evaluated here on a real scrape, the PromQL arithmetic by hand)."""

from __future__ import annotations

import ast
import operator
import os
import re
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dragoman.runtime.certificate_expiry import XDS_SERVER, CertificateExpiry
from dragoman.runtime.metrics import Metrics
from tests.support.kustomize import kustomize

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPONENT = DEPLOY / "components" / "certificate-alerts"
DAY = 86400.0


def rendered_with_component(tmp_path: Path) -> list[dict[str, Any]]:
    base = os.path.relpath(DEPLOY, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{base}]\ncomponents: [{base}/components/certificate-alerts]\n"
    )
    return list(kustomize(tmp_path))


def alert_rule(tmp_path: Path) -> dict[str, Any]:
    documents = rendered_with_component(tmp_path)
    [rule_object] = [doc for doc in documents if doc["kind"] == "PrometheusRule"]
    assert rule_object["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule_object["metadata"]["namespace"] == "dragoman-system"
    [group] = rule_object["spec"]["groups"]
    [rule] = group["rules"]
    assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
    assert rule["alert"] == "DragomanCertificateExpiresSoon"
    assert rule["labels"]["severity"] == "warning"
    assert re.fullmatch(r"[0-9]+[smhd]", rule["for"])
    return rule


def test_the_component_adds_only_the_rule_to_a_valid_base(tmp_path: Path) -> None:
    documents = rendered_with_component(tmp_path)
    kinds = [doc["kind"] for doc in documents]
    assert kinds.count("PrometheusRule") == 1
    base = {(doc["kind"], doc["metadata"]["name"]) for doc in kustomize(DEPLOY)}
    assert {(doc["kind"], doc["metadata"]["name"]) for doc in documents} - base == {
        ("PrometheusRule", "dragoman-certificates")
    }
    for doc in documents:
        if doc["kind"] == "PrometheusRule" or doc["apiVersion"].startswith("gateway."):
            continue  # CRDs kubernetes-validate does not know
        kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), strict=True)


def scrape(seconds_left: float, now: float) -> dict[str, float]:
    metrics = Metrics()
    expiry = CertificateExpiry(XDS_SERVER, "server.crt", now + seconds_left)
    metrics.state.xds_certificates = lambda: [expiry]
    text = metrics.exposition().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _evaluate(node: ast.AST) -> Any:
    """Numbers, + - * / and one comparison: the PromQL of the rule, a scalar per series."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp):
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _evaluate(node.left), _evaluate(node.comparators[0])
        return _OPERATORS[type(node.ops[0])](left, right)
    raise AssertionError(f"the rule's expression uses {ast.dump(node)}: extend the evaluator")


def fires(expr: str, scraped: dict[str, float], now: float) -> bool:
    names = set(re.findall(r"\bdragoman_[a-z_]+\b", expr))
    assert names, expr
    missing = names - set(scraped)
    assert not missing, f"the rule names metrics dragoman does not expose: {missing}"
    arithmetic = expr.replace("time()", repr(now))
    for name in names:
        arithmetic = re.sub(rf"\b{name}\b", repr(scraped[name]), arithmetic)
    return bool(_evaluate(ast.parse(arithmetic, mode="eval")))


@pytest.mark.parametrize(
    ("days_left", "firing"),
    [(-1, True), (1, True), (13.9, True), (14.1, False), (30, False)],
)
def test_the_rule_fires_under_14_days(tmp_path: Path, days_left: float, firing: bool) -> None:
    rule = alert_rule(tmp_path)
    now = time.time()
    assert fires(rule["expr"], scrape(days_left * DAY, now), now) is firing
