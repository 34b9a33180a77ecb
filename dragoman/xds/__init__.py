"""xDS serving: snapshots of serialized resources, per-stream protocol state, the gRPC shell."""
