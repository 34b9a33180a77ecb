"""Proxyless gRPC clients: what they can dial, and the resources they are served (API
listeners, LOGICAL_DNS clusters under aggregates), translated lazily per Gateway group."""
