"""dragoman: an Envoy xDS control plane for Kubernetes Services and Gateway API routes."""


def __getattr__(name: str) -> str:
    # `__version__` is read from the installed package's metadata on first use: importing
    # importlib.metadata costs a few MiB that a server which never prints it does not need.
    if name != "__version__":
        raise AttributeError(f"module 'dragoman' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        # One source for the version: pyproject.toml, through the installed package's metadata.
        value = version("dragoman")
    except PackageNotFoundError:  # run from a source tree that was never installed
        value = "0.0.0+unknown"
    globals()["__version__"] = value
    return value
