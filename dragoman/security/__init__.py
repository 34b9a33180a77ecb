"""Mutual TLS for the xDS port: identities, certificate files, and making certificates."""
