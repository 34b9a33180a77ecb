"""PEM blocks by label, and recognising private key material wherever it hides.

Certificate chains keep their CERTIFICATE blocks only: a `tls.crt` with the key appended
must never carry that key into anything dragoman serves or prints.
"""

from __future__ import annotations

import base64
import binascii
import re

# A PEM block: BEGIN and END with the same label, base64 (and headers) between.
_BLOCK = re.compile(
    rb"-----BEGIN ([A-Z0-9 ]{1,64})-----\r?\n(.*?)-----END \1-----\r?\n?", re.DOTALL
)
CERTIFICATE = "CERTIFICATE"
# "-----BEGIN" in base64, at the start of an encoded text.
_PEM_IN_BASE64 = b"LS0tLS1CRUdJTi"
# Shorter base64 strings are not worth trying as DER keys (the smallest, Ed25519, is 48 bytes).
_MIN_KEY_BASE64 = 64


def split_chain(data: bytes) -> tuple[bytes, tuple[str, ...]]:
    """(the CERTIFICATE blocks of `data`, the labels of every other block dropped).

    Text between blocks (comments some tools write) is dropped too; it is not reported.
    """
    kept: list[bytes] = []
    dropped: list[str] = []
    for match in _BLOCK.finditer(data):
        label = match.group(1).decode("ascii")
        if label == CERTIFICATE:
            block = match.group(0)
            kept.append(block if block.endswith(b"\n") else block + b"\n")
        else:
            dropped.append(label)
    if b"PRIVATE KEY" in data and not any("PRIVATE KEY" in label for label in dropped):
        dropped.append("PRIVATE KEY")  # a malformed key block: still not kept
    return b"".join(kept), tuple(dropped)


def holds_private_key(data: bytes | str) -> bool:
    """Whether `data` is or contains a private key: a PEM key block (any label: RSA, EC,
    ENCRYPTED, OPENSSH ...), or base64 of one, or base64 of a DER private key."""
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    if b"PRIVATE KEY" in raw:
        return True
    compact = raw.strip()
    if len(compact) < _MIN_KEY_BASE64:
        return False
    try:
        decoded = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        # Not base64 as a whole, yet holding base64 of a PEM block: hide rather than guess.
        return _PEM_IN_BASE64 in compact
    if b"PRIVATE KEY" in decoded:
        return True
    return _is_der_private_key(decoded)


def _is_der_private_key(data: bytes) -> bool:
    if not data.startswith(b"\x30"):  # every DER key is a SEQUENCE
        return False
    # Imported here: text without DER-looking blobs never needs `cryptography`.
    from cryptography.hazmat.primitives import serialization

    try:
        serialization.load_der_private_key(data, password=None)
    except TypeError:
        return True  # an encrypted key: still a key
    except Exception:  # any failure to parse means: not a key
        return False
    return True
