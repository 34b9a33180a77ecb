"""The pure translation: DAG values in, Envoy xDS resources (protobuf, serialized once) out."""

from dragoman.envoy.options import TranslateOptions
from dragoman.envoy.translate import translate, translate_endpoints

__all__ = ["TranslateOptions", "translate", "translate_endpoints"]
