"""Route rules to Envoy routes: matches and their precedence, actions, filters, backendRefs,
ReferenceGrants and conflicts between route kinds."""
