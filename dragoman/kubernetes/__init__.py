"""Running inside a cluster: the API server as a source, leader election and status writes.

The kubernetes client is synchronous, so this package keeps its blocking calls in worker
threads (one per watched collection, plus short calls for Leases and status) and hands
everything they learn to the asyncio loop that owns the store, the controller and xDS.
"""
