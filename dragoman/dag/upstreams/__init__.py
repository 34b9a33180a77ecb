"""What routes forward to: clusters, external names and the platform's policy for them, DNS
settings and the DNS check's results, TLS to backends, endpoints."""
