"""`dragoman render`: translated resources as YAML in Envoy's JSON mapping."""

from __future__ import annotations

import base64

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy import translate
from dragoman.envoy.text.snapshot_yaml import REDACTED, redacted, render_yaml
from tests.support.envoy_dags import every_kind_of_dag


def test_one_document_per_group_with_the_five_sections() -> None:
    text = render_yaml(translate(every_kind_of_dag()))

    documents = list(yaml.safe_load_all(text))
    assert [d["group"] for d in documents] == [ALL_GATEWAYS, "default/demo"]
    for document in documents:
        assert list(document) == [
            "group",
            "clusters",
            "endpoints",
            "secrets",
            "listeners",
            "routes",
        ]
        assert [c["name"] for c in document["clusters"]] == [
            "default/api/443",
            "default/web/80",
            "default/web/80/h2c",
        ]
        assert [e["cluster_name"] for e in document["endpoints"]] == [
            "default/web/80",
            "default/web/80/h2c",
        ]
    assert "# node group: all gateways\n" in text
    assert "# node group: gateway default/demo\n" in text


def test_any_values_are_expanded() -> None:
    document = next(yaml.safe_load_all(render_yaml(translate(every_kind_of_dag()))))

    dns = next(c for c in document["clusters"] if "cluster_type" in c)
    assert dns["cluster_type"]["typed_config"] == {
        "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
        "dns_refresh_rate": "30s",
        "respect_dns_ttl": True,
        "dns_lookup_family": "V4_PREFERRED",
    }
    manager = document["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert manager["@type"].endswith("HttpConnectionManager")
    assert manager["rds"]["route_config_name"] == "default/demo/http"
    assert manager["http_filters"][-1]["typed_config"]["@type"].endswith("router.v3.Router")


def test_output_is_deterministic() -> None:
    assert render_yaml(translate(every_kind_of_dag())) == render_yaml(
        translate(every_kind_of_dag())
    )


def test_nothing_to_render_is_empty() -> None:
    assert render_yaml({}) == ""


def test_redaction_goes_by_content_not_field_names() -> None:
    """A key anywhere (PEM, base64 of PEM, base64 of DER), under any field name, is hidden."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    der = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    data = {
        "certificate_chain": {"inline_bytes": base64.b64encode(b"cert\n" + pem).decode()},
        "note": pem.decode(),
        "nested": [{"inline_string": base64.b64encode(der).decode()}],
        "name": "default/web/80",
        "plain_base64": base64.b64encode(b"x" * 96).decode(),
    }
    shown = redacted(data)
    assert shown["certificate_chain"]["inline_bytes"] == REDACTED
    assert shown["note"] == REDACTED
    assert shown["nested"][0]["inline_string"] == REDACTED
    assert shown["name"] == "default/web/80"
    assert shown["plain_base64"] == data["plain_base64"]  # not a key: shown
