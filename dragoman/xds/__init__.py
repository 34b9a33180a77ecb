"""xDS serving of opaque snapshots, in wings: `protocol` (the SotW and delta stream state
machines, pure), `server` (the gRPC shell, the snapshot cache, the registry of streams),
`csds` (client status) and `transport` (mutual TLS, identities and what they may receive)."""
