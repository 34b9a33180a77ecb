"""Sources: where typed objects come from.

YAML/JSON manifests become `dragoman.objects` values here, once, with errors that name the
file, the object and the field. A manifest directory is one complete source; `watch` tells
its owner when the directory changed.
"""
