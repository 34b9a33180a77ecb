"""What the objects provisioned for a Gateway are called and labelled: predictable, so a
user can find them (`dragoman-<gateway>`) and an upgrade finds the ones it made before."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from dragoman.objects import Gateway

PREFIX = "dragoman-"
# A Service's name is a DNS-1035 label: at most 63 characters, no dots, a letter first.
_MAX_NAME = 63
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PART_OF_LABEL = "app.kubernetes.io/part-of"
# The label Gateway API (GEP-1762) gives the resources of an in-cluster Gateway.
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
# Lets the pods through dragoman's xDS NetworkPolicy (deploy/02-dragoman.yaml).
ENVOY_LABEL = "dragoman.dev/envoy"
MANAGED_BY = "dragoman"


def object_name(gateway_name: str) -> str:
    """`dragoman-<gateway>`; a Gateway name with dots, or too long for that, gets a stem
    of it and a hash of the whole name (still the same on every run)."""
    plain = PREFIX + gateway_name
    if _DNS1035.fullmatch(plain):
        return plain
    digest = hashlib.sha256(gateway_name.encode()).hexdigest()[:8]
    stem = re.sub(r"[^a-z0-9-]+", "-", gateway_name)[: _MAX_NAME - len(PREFIX) - 9].strip("-")
    return f"{PREFIX}{stem}-{digest}" if stem else f"{PREFIX}{digest}"


def xds_secret_name(gateway_name: str) -> str:
    """The Secret holding the Gateway's xDS client certificate (tls.crt, tls.key, ca.crt)."""
    return object_name(gateway_name) + "-xds"


def selector_labels(gateway: Gateway) -> dict[str, str]:
    """What the Deployment selects its pods by, and the Service its endpoints by."""
    return {NAME_LABEL: "envoy", INSTANCE_LABEL: object_name(gateway.meta.name)}


def object_labels(gateway: Gateway) -> dict[str, str]:
    """Labels of every provisioned object: the Gateway's spec.infrastructure.labels, then
    dragoman's own (which win: the selectors depend on them)."""
    labels = dict(gateway.infrastructure_labels)
    labels.update(selector_labels(gateway))
    labels[MANAGED_BY_LABEL] = MANAGED_BY
    labels[PART_OF_LABEL] = "dragoman"
    if _LABEL_VALUE.fullmatch(gateway.meta.name) and len(gateway.meta.name) <= _MAX_NAME:
        labels[GATEWAY_NAME_LABEL] = gateway.meta.name
    return labels


def object_annotations(gateway: Gateway) -> Mapping[str, str]:
    return dict(gateway.infrastructure_annotations)
