"""The /debug pages: what dragoman serves, as a picture (HTML with inline SVG), as Graphviz
DOT text, and as the Envoy resources themselves (keys redacted)."""
