"""DAG values → the Envoy protobuf messages served as resources: clusters, listeners, route
configurations, endpoints, SDS secrets, and the parts they share (TLS, access logs, CORS, the
DNS cluster extension, config sources)."""
