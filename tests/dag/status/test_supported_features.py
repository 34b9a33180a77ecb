"""GatewayClass status.supportedFeatures (GEP-2162): the features of the one table, each
proven by a test that exists, listed sorted on every accepted GatewayClass and only there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dragoman.dag.status.supported_features import SUPPORTED_FEATURES, supported_features
from tests.support.builders import gateway_class
from tests.support.status_builds import build_text, status

ROOT = Path(__file__).resolve().parents[3]


def functions_in(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize(("feature", "proof"), sorted(SUPPORTED_FEATURES.items()))
def test_every_listed_feature_names_a_test_that_exists(
    feature: str, proof: tuple[str, str]
) -> None:
    path, function = proof
    assert (ROOT / path).is_file(), f"{feature}: no file {path}"
    assert function.startswith("test_")
    assert function in functions_in(path), f"{feature}: no {function} in {path}"


def test_accepted_classes_list_the_features_sorted() -> None:
    dag = build_text(gateway_class())
    found = status(dag, "GatewayClass", "dragoman")["supportedFeatures"]
    assert found == supported_features()
    names = [entry["name"] for entry in found]
    assert names == sorted(names) and len(names) == len(set(names))
    assert len(names) <= 64  # the CRD's maxItems
    assert {"Gateway", "HTTPRoute", "GatewayFrontendClientCertificateValidation"} <= set(names)


def test_a_refused_class_lists_none() -> None:
    refused = gateway_class()
    refused["spec"]["parametersRef"] = {"group": "example.com", "kind": "Config", "name": "x"}
    dag = build_text(refused)
    found = status(dag, "GatewayClass", "dragoman")
    assert found["conditions"][0]["status"] == "False"
    assert found["supportedFeatures"] == []  # written empty: an old list must not stay
