"""Shared test code: object builders, the fake Kubernetes API server, the routing simulator,
the xDS test client and the end-to-end harness."""
