"""Resources that remember the value they were translated from, what they name, and how they
were made: a later translation reuses one whose value is unchanged without serializing it
again, and a per-type client's variant is translated from the same value with its own
config source."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from dragoman.dag.model import (
    Cluster,
    HttpListener,
    HttpsListener,
    Listener,
    LoadAssignment,
)
from dragoman.envoy.resources.cluster_messages import cluster
from dragoman.envoy.resources.endpoint_messages import cluster_load_assignment
from dragoman.envoy.resources.listener_messages import listener
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.snapshots.resources import NO_REFERENCES, Resource, type_url_of

# Makes a resource's message from its value with the translation's options.
Translator = Callable[[Any, TranslateOptions], Message]


@dataclass(frozen=True, slots=True)
class Translated(Resource):
    """A Resource with the value it was made from and, for clusters and listeners (whose
    bytes depend on the config source), the translator and options that made it."""

    source: Any = None
    translator: Translator | None = None
    options: TranslateOptions | None = None

    @classmethod
    def made(
        cls,
        name: str,
        source: Any,
        translator: Translator,
        options: TranslateOptions,
        references: tuple[str, ...] = NO_REFERENCES,
    ) -> Translated:
        return cls.of_message(
            name, translator(source, options), source, translator, options, references
        )

    @classmethod
    def of_message(
        cls,
        name: str,
        message: Message,
        source: Any,
        translator: Translator,
        options: TranslateOptions,
        references: tuple[str, ...] = NO_REFERENCES,
    ) -> Translated:
        """`message`, which is what `translator(source, options)` gives."""
        body = message.SerializeToString(deterministic=True)
        digest = hashlib.sha256(body).hexdigest()
        type_url = type_url_of(message)
        return cls(name, type_url, body, digest, references, source, translator, options)

    def translated_with(self, options: TranslateOptions) -> Resource:
        """This resource as `options` translate it: itself when the bytes are the same (or it
        cannot be translated again)."""
        if self.translator is None or self.options is None:
            return self
        body = self.translator(self.source, options).SerializeToString(deterministic=True)
        if body == self.body:
            return self
        return Resource.of_bytes(self.name, self.type_url, body, self.references)


def cluster_resource(value: Cluster, options: TranslateOptions) -> Translated:
    # The CLA an EDS cluster reads is named like the cluster.
    references = (value.name,) if value.served_over_eds else NO_REFERENCES
    return Translated.made(value.name, value, cluster, options, references)


def listener_resource(value: Listener, options: TranslateOptions) -> Translated:
    return Translated.made(value.name, value, listener, options, route_table_names(value))


def route_table_names(value: Listener) -> tuple[str, ...]:
    """The RouteConfigurations a listener's connection managers fetch over RDS, each once."""
    if isinstance(value, HttpsListener):
        return tuple(dict.fromkeys(chain.route_table for chain in value.filter_chains))
    if isinstance(value, HttpListener):
        # A scoped one fetches its scopes whole, naming none.
        return NO_REFERENCES if value.scoped else (value.route_table,)
    return NO_REFERENCES  # TCP, TLS passthrough and UDP ports route no HTTP


def assignment_resource(value: LoadAssignment) -> Translated:
    """A CLA's Resource, remembering the LoadAssignment it was made from."""
    message = cluster_load_assignment(value)
    body = message.SerializeToString(deterministic=True)
    digest = hashlib.sha256(body).hexdigest()
    return Translated(value.cluster, type_url_of(message), body, digest, source=value)
