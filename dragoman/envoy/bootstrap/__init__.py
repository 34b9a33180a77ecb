"""The bootstraps Envoy starts from: how it reaches dragoman, its admin, its stats listener."""
