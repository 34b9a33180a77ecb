"""The pure translation: DAG values in, Envoy xDS resources (protobuf, serialized once) out."""

from dragoman.envoy.translate_options import TranslateOptions
from dragoman.envoy.translation.translator import translate, translate_endpoints

__all__ = ["TranslateOptions", "translate", "translate_endpoints"]
