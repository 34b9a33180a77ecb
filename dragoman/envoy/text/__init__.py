"""Resources as text for people: Envoy's JSON mapping, as YAML Envoy reads back exactly."""
