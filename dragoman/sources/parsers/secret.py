"""v1 Secret from decoded manifests.

Secret values are base64-decoded here, once. Messages name the key and never show a value:
a Secret may hold private keys.
"""

from __future__ import annotations

import base64
import binascii
import re

from dragoman.objects import ObjectMeta, Secret
from dragoman.objects.secret import TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY, TLS_SECRET_TYPE
from dragoman.sources.fields import Node

# What the API server allows as a key of Secret and ConfigMap data.
_DATA_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_DATA_KEY_EXPECTED = "a key of letters, digits, '-', '_' or '.' (at most 253 characters)"


def parse_secret(root: Node, meta: ObjectMeta) -> Secret:
    secret_type = root.string("type", default="Opaque", min_length=1)
    data: dict[str, bytes] = {}
    encoded = root.mapping("data")
    if encoded is not None:
        for key, value in encoded.data.items():
            path = encoded.at(str(key))
            if check_data_key(encoded, key, path) and isinstance(value, str):
                decoded = _base64(value)
                if decoded is None:
                    encoded.report(path, "is not valid base64 (the value is not shown)")
                else:
                    data[key] = decoded
            elif value is not None and not isinstance(value, str):
                encoded.expected(path, "a base64 string", value)
    # stringData is write-only in the API: the server merges it into data, winning over it.
    plain = root.mapping("stringData")
    if plain is not None:
        for key, value in plain.data.items():
            path = plain.at(str(key))
            if check_data_key(plain, key, path) and isinstance(value, str):
                data[key] = value.encode()
            elif value is not None and not isinstance(value, str):
                plain.expected(path, "a string", value)
    if secret_type == TLS_SECRET_TYPE:
        written = {*(encoded.data if encoded else ()), *(plain.data if plain else ())}
        for key in (TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY):
            if key not in written:
                root.report(f"data.{key}", f"is required in a Secret of type {TLS_SECRET_TYPE}")
    return Secret(meta=meta, type=secret_type, data=data)


def check_data_key(node: Node, key: object, path: str) -> bool:
    if not isinstance(key, str) or len(key) > 253 or not _DATA_KEY.fullmatch(key):
        node.expected(path, _DATA_KEY_EXPECTED, key)
        return False
    return True


def _base64(value: str) -> bytes | None:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
