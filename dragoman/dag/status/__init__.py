"""Every object's status, from what the build decided: conditions, Gateways, routes, policies."""
