"""One parser per kind (or family of kinds): a decoded document to a typed object, every
problem named with its field path. `sources/kind_parsers.py` names the parser of each kind."""
