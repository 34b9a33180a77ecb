"""A Kubernetes API server that runs inside the test process, for the real client."""

from tests.support.kubeapi.server import DEFAULT_TOKEN, KubeApiServer

__all__ = ["DEFAULT_TOKEN", "KubeApiServer"]
