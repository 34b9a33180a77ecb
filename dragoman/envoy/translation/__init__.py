"""The translator: a DAG to one snapshot per node group, each translation reusing what the
previous one serialized (a full translation is one starting from nothing), and the
per-type clients' variant of a snapshot translated from the same values."""
