"""ExternalName safety: which names Envoy may resolve, and which are in-cluster aliases."""

from __future__ import annotations

import pytest

from dragoman.dag.external_names import (
    in_cluster_target,
    is_cluster_local,
    normalise,
    unsafe_reason,
)

SAFE = [
    "api.example.com",
    "API.Example.COM.",  # normalised
    "a.b",
    "xn--bcher-kva.example",
    "foo-bar.example.com",
    "web.default.svc.cluster.local",  # syntactically safe; the build turns it into an alias
    "1.example.com",  # numeric labels are fine below a real top-level domain
    "a" * 63 + ".example.com",
    # Close to, but not, a metadata service's name.
    "metadata.example.com",
    "api.metadata.google.internal.example.com",
    "instance-data.example.com",
]


@pytest.mark.parametrize("name", SAFE)
def test_safe_names(name: str) -> None:
    assert unsafe_reason(name) is None


UNSAFE = [
    # (name, words the message must contain)
    ("", "empty"),
    (".", "empty"),
    ("localhost", "localhost"),
    ("LOCALHOST.", "localhost"),
    ("localhost.localdomain", "localhost"),
    ("localhost6.localdomain6", "localhost"),
    ("admin.localhost", "localhost"),
    ("a.b.LOCALHOST.", "localhost"),
    ("kubernetes", "single-label"),
    ("internal.", "single-label"),
    ("127.0.0.1", "loopback"),
    ("127.0.0.2", "loopback"),
    ("::1", "loopback"),
    ("[::1]", "loopback"),
    ("[::ffff:127.0.0.1]", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("[::]", "unspecified"),
    ("169.254.169.254", "metadata"),
    ("::ffff:169.254.169.254", "metadata"),
    ("fd00:ec2::254", "metadata"),
    ("[FD00:EC2::254]", "metadata"),
    ("100.100.100.200", "metadata"),
    ("192.0.0.192", "metadata"),
    ("168.63.129.16", "metadata"),  # Azure WireServer
    ("fd00:ec2::23", "metadata"),  # AWS EKS Pod Identity Agent
    # Metadata services by name: without the DNS check nothing else would catch them.
    ("metadata.google.internal", "Google Cloud instance metadata service"),
    ("Metadata.Google.Internal.", "Google Cloud instance metadata service"),
    ("metadata.goog", "Google Cloud instance metadata service"),
    ("instance-data.ec2.internal", "AWS instance metadata service"),
    ("instance-data.eu-west-1.compute.internal", "AWS instance metadata service"),
    ("metadata.tencentyun.com", "Tencent Cloud instance metadata service"),
    ("api.metadata.cloud.ibm.com", "IBM Cloud instance metadata service"),
    ("API.Metadata.Cloud.IBM.com.", "IBM Cloud instance metadata service"),
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("10.0.0.1", "EndpointSlice"),
    ("93.184.216.34", "EndpointSlice"),
    ("2001:db8::1", "EndpointSlice"),
    ("[2001:db8::1]", "EndpointSlice"),
    ("127.1", "IPv4"),  # short IPv4 form some resolvers accept
    ("0x7f.0.0.1", "IPv4"),
    ("example.123", "IPv4"),
    ("[127.0.0.1]", "not a valid DNS name"),  # brackets hold IPv6 only
    ("under_score.example.com", "not a valid DNS name"),
    ("-lead.example.com", "not a valid DNS name"),
    ("trail-.example.com", "not a valid DNS name"),
    ("a..b", "not a valid DNS name"),
    ("*.example.com", "not a valid DNS name"),
    ("http://example.com", "not a valid DNS name"),
    ("example.com:443", "not a valid DNS name"),
    ("a" * 64 + ".example.com", "not a valid DNS name"),
    (".".join(["a" * 63] * 4) + ".com", "longer than 253"),
]


@pytest.mark.parametrize(("name", "expected"), UNSAFE)
def test_unsafe_names(name: str, expected: str) -> None:
    reason = unsafe_reason(name)
    assert reason is not None
    assert expected in reason


def test_a_name_of_253_characters_is_allowed() -> None:
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    assert len(name) == 253
    assert unsafe_reason(name) is None
    assert unsafe_reason(name + ".") is None  # the trailing dot does not count


@pytest.mark.parametrize(
    ("name", "expected"), [("Api.Example.com.", "api.example.com"), ("a.b..", "a.b.")]
)
def test_normalise_strips_one_trailing_dot(name: str, expected: str) -> None:
    assert normalise(name) == expected


IN_CLUSTER = [
    ("web.shop.svc.cluster.local", "cluster.local", ("shop", "web")),
    ("WEB.shop.svc.cluster.local.", "cluster.local", ("shop", "web")),
    ("web.shop.svc", "cluster.local", ("shop", "web")),
    ("web.shop.svc.corp.internal", "corp.internal", ("shop", "web")),
    ("web.shop.svc.cluster.local", "corp.internal", None),  # another cluster's domain
    ("web.shop.svc.cluster.local", "cluster.local.", ("shop", "web")),
    ("pod.web.shop.svc.cluster.local", "cluster.local", None),
    ("shop.svc.cluster.local", "cluster.local", None),
    ("web.shop.cluster.local", "cluster.local", None),
    ("api.example.com", "cluster.local", None),
]


@pytest.mark.parametrize(("name", "domain", "expected"), IN_CLUSTER)
def test_in_cluster_target(name: str, domain: str, expected: tuple[str, str] | None) -> None:
    assert in_cluster_target(name, domain) == expected


CLUSTER_LOCAL = [
    ("web.shop.svc.cluster.local", True),
    ("pod.web.shop.svc.cluster.local", True),
    ("web.shop.pod.cluster.local", True),
    ("cluster.local", True),
    ("web.shop.svc", True),
    ("a.b.c.svc", True),
    ("api.example.com", False),
    ("notcluster.local", False),
    ("svc.example.com", False),
]


@pytest.mark.parametrize(("name", "expected"), CLUSTER_LOCAL)
def test_is_cluster_local(name: str, expected: bool) -> None:
    assert is_cluster_local(name, "cluster.local") is expected
