"""What translation hands to serving: serialized resources by type and name, one snapshot per
node group, and what one resource names in another. Imports nothing else of dragoman."""
