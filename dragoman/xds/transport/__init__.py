"""Transport security of the xDS server: mutual TLS credentials, the peer's identity, and
what that identity may receive."""
