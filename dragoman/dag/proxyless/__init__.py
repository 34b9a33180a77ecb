"""What proxyless gRPC clients can dial: every Service port by its cluster DNS name, and
every exact route hostname of a node group's ports, as plain values for translation."""
