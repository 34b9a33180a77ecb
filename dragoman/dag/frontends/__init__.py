"""Gateways and what faces clients: GatewayClasses, listeners and their certificates, route
attachment, hostnames, virtual hosts, and what each group of Envoys receives."""
