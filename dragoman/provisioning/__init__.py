"""Envoys for each Gateway: the Kubernetes objects dragoman provisions, computed purely."""
