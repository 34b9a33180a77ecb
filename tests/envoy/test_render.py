"""`dragoman render`: translated resources as YAML in Envoy's JSON mapping."""

from __future__ import annotations

import yaml

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy import translate
from dragoman.envoy.render import render_yaml
from tests.support.envoy_dags import every_kind_of_dag


def test_one_document_per_group_with_the_four_sections() -> None:
    text = render_yaml(translate(every_kind_of_dag()))

    documents = list(yaml.safe_load_all(text))
    assert [d["group"] for d in documents] == [ALL_GATEWAYS, "default/demo"]
    for document in documents:
        assert list(document) == ["group", "clusters", "endpoints", "listeners", "routes"]
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
