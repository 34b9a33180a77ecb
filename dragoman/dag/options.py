"""Settings that shape a DAG build but come from the operator, not from Kubernetes objects."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BuildOptions:
    # The DNS suffix of in-cluster names, `<svc>.<ns>.svc.<cluster_domain>`.
    cluster_domain: str = "cluster.local"
