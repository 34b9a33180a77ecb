"""What provisioning reads from a manifest directory beside the objects of the build: the
EnvoyProxyParameters, and the objects already named like the ones it would create (with
their owners), so a name another object holds is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dragoman.objects import ObjectKey
from dragoman.provisioning.names import GATEWAY_NAME_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from dragoman.provisioning.parameters import (
    API_VERSION,
    KIND,
    EnvoyProxyParameters,
    parse_parameters,
)
from dragoman.provisioning.plan import PROVISIONED_KINDS, OwnerRef
from dragoman.sources.decode import DecodeError, decode_documents
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import iter_documents
from dragoman.sources.tree import scan_tree

_PROVISIONED = frozenset(PROVISIONED_KINDS)


@dataclass
class ProvisionInputs:
    parameters: dict[tuple[str, str], EnvoyProxyParameters] = field(default_factory=dict)
    existing: dict[ObjectKey, tuple[OwnerRef, ...]] = field(default_factory=dict)


def read_provision_inputs(root: Path, default_namespace: str = "default") -> ProvisionInputs:
    """Every file of the directory, as the manifest source scans it; files it cannot read
    or decode are left to its own errors (the build's load reports them)."""
    inputs = ProvisionInputs()
    for stamp in scan_tree(root).files:
        path = root / stamp.path
        try:
            documents = decode_documents(path.read_bytes(), is_json=path.suffix == ".json")
        except (OSError, DecodeError, ValueError):
            continue
        for document in documents:
            if not isinstance(document, Mapping):
                continue
            try:
                items = list(iter_documents(document))
            except ObjectError:
                continue
            for _, item in items:
                if isinstance(item, Mapping):
                    _take(item, inputs, default_namespace)
    return inputs


def _take(doc: Mapping[str, Any], inputs: ProvisionInputs, default_namespace: str) -> None:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if (api_version, kind) == (API_VERSION, KIND):
        parameters = parse_parameters(doc, default_namespace)
        inputs.parameters[(parameters.namespace, parameters.name)] = parameters
    elif (api_version, kind) in _PROVISIONED:
        metadata = doc.get("metadata")
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
            return
        namespace = metadata.get("namespace")
        key = ObjectKey(
            str(kind),
            namespace if isinstance(namespace, str) else default_namespace,
            metadata["name"],
        )
        inputs.existing[key] = _owners(metadata)


def _owners(metadata: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    references = metadata.get("ownerReferences")
    owners = [
        OwnerRef(str(ref.get("kind", "")), str(ref.get("name", "")), str(ref.get("uid", "")))
        for ref in (references if isinstance(references, list) else ())
        if isinstance(ref, Mapping)
    ]
    # What `dragoman provision` printed for a Gateway not yet applied (no uid, so no
    # ownerReferences) is that Gateway's too, by its labels.
    labels = metadata.get("labels")
    if not owners and isinstance(labels, Mapping) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY:
        gateway = labels.get(GATEWAY_NAME_LABEL)
        if isinstance(gateway, str):
            owners.append(OwnerRef("Gateway", gateway))
    return tuple(owners)
