"""dragoman: an Envoy xDS control plane for Kubernetes Services and Gateway API routes."""

__version__ = "0.1.0"
