"""The gRPC shell around the stream state machines: the server and its stream loop, the
snapshot cache streams are served from, the registry of connected streams."""
