"""dragoman: an Envoy xDS control plane for Kubernetes Services and Gateway API routes."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One source for the version: pyproject.toml, through the installed package's metadata.
    __version__ = version("dragoman")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0+unknown"
