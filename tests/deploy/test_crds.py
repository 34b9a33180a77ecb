"""dragoman's own CRDs in deploy/ agree with the table of kinds and with the parsers: what the
schema accepts the parser reads without problems, and what it refuses the parser refuses
too, naming the same field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dragoman.objects.kinds import KINDS
from dragoman.provisioning.parameters import KIND as PARAMETERS_KIND
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object
from tests.support.credentials import credential_injector, oauth2_injector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def crds() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "CustomResourceDefinition":
                found[doc["spec"]["names"]["kind"]] = doc
    return found


def schema(kind: str) -> dict[str, Any]:
    [version] = crds()[kind]["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_every_kind_of_dragomans_group_has_its_crd_as_the_table_says() -> None:
    own = [kind for kind in KINDS if kind.group.endswith("dragoman.dev")]
    assert own, "no kind of dragoman's own"
    found = crds()
    # Besides the kinds the sources read: the parameters provisioning reads from a Gateway's
    # (or its class's) parametersRef.
    assert sorted(found) == sorted([*(kind.kind for kind in own), PARAMETERS_KIND])
    for kind in own:
        spec = found[kind.kind]["spec"]
        assert found[kind.kind]["metadata"]["name"] == f"{kind.plural}.{kind.group}"
        assert (spec["group"], spec["names"]["plural"]) == (kind.group, kind.plural)
        assert spec["scope"] == ("Namespaced" if kind.namespaced else "Cluster")
        assert [v["name"] for v in spec["versions"]] == list(kind.versions)
        assert all(
            ("status" in v.get("subresources", {})) == kind.has_status for v in spec["versions"]
        )


GOOD = [
    credential_injector("a", "api-key", "token"),
    credential_injector("a", "api-key", "tls.key_2", header="X-Api-Key", overwrite=True),
    credential_injector("a", "api-key", "token", secret_namespace="default"),
    oauth2_injector("a"),
    oauth2_injector(
        "a",
        scopes=["read", "write:orders"],
        tokenFetchRetryInterval="1m30s",
        tokenEndpoint={
            "backendRef": {"group": "gateway.networking.x-k8s.io", "kind": "XBackend", "name": "i"},
            "path": "/oauth2/v2.0/token?tenant=x",
            "timeout": "500ms",
        },
    ),
]
BAD = [
    (credential_injector("a", "api-key", "to ken"), "secretRef"),
    (credential_injector("a", "Api_Key", "token"), "secretRef"),
    (credential_injector("a", "api-key", "token", header="X Api"), "header"),
    (credential_injector("a", "api-key", "token", header=""), "header"),
    ({**credential_injector("a", "s", "k"), "spec": {"header": "X"}}, "secretRef"),
    ({**credential_injector("a", "s", "k"), "spec": {"secretRef": {"name": "s"}}}, "key"),
    (oauth2_injector("a", clientID=""), "clientID"),
    (oauth2_injector("a", clientID="my client"), "clientID"),
    (oauth2_injector("a", scopes=["read write"]), "scopes"),
    (oauth2_injector("a", tokenFetchRetryInterval="-1s"), "tokenFetchRetryInterval"),
    (oauth2_injector("a", path="token"), "path"),
    (oauth2_injector("a", path=None), "path"),
    (oauth2_injector("a", clientSecretRef={"name": "s"}), "key"),
    (
        {
            **oauth2_injector("a"),
            "spec": {**oauth2_injector("a")["spec"], "secretRef": {"name": "s", "key": "k"}},
        },
        "oauth2",
    ),
]


def test_the_rules_the_schema_checks_by_cel_the_parser_checks_too() -> None:
    spec = schema("CredentialInjector")["properties"]["spec"]
    rules = [rule["rule"] for rule in spec["x-kubernetes-validations"]]
    assert len(rules) == 2 and "has(self.oauth2)" in rules[0] and "header" in rules[1]
    both = {**oauth2_injector("a")["spec"], "secretRef": {"name": "s", "key": "k"}}
    other_header = {**oauth2_injector("a")["spec"], "header": "X-Token"}
    for spec_value, field in ((both, "spec.secretRef"), (other_header, "spec.header")):
        with pytest.raises(ObjectError) as error:
            parse_object({**oauth2_injector("a"), "spec": spec_value})
        assert field in str(error.value)
    assert parse_object(
        {**oauth2_injector("a"), "spec": {**other_header, "header": "authorization"}}
    )


def test_the_readmes_oauth2_example_is_valid_for_both() -> None:
    readme = (DEPLOY.parent / "README.md").read_text()
    [example] = [
        block.split("```", 1)[0]
        for block in readme.split("```yaml\n")[1:]
        if "oauth2:" in block.split("```", 1)[0]
    ]
    [injector] = [d for d in yaml.safe_load_all(example) if d and d["kind"] == "CredentialInjector"]
    jsonschema.validate(injector, schema("CredentialInjector"))
    assert parse_object(injector) is not None


@pytest.mark.parametrize("manifest", GOOD)
def test_what_the_schema_accepts_the_parser_reads(manifest: dict[str, Any]) -> None:
    jsonschema.validate(manifest, schema("CredentialInjector"))
    assert parse_object(manifest) is not None


@pytest.mark.parametrize(("manifest", "field"), BAD)
def test_what_the_schema_refuses_the_parser_refuses(manifest: dict[str, Any], field: str) -> None:
    with pytest.raises(jsonschema.ValidationError) as refused:
        jsonschema.validate(manifest, schema("CredentialInjector"))
    # (A oneOf says which of its branches failed, and why, in its context.)
    said = [refused.value.message, *(e.message for e in refused.value.context)]
    assert field in ".".join(map(str, refused.value.absolute_path)) + " ".join(said)
    with pytest.raises(ObjectError) as error:
        parse_object(manifest)
    assert field in str(error.value)
