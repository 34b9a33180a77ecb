"""Which dragoman process this is: the name its clients' status (CSDS) and its leader
election give it."""

from __future__ import annotations

import os
import socket


def replica_name() -> str:
    """The pod's name (POD_NAME, from the downward API) or, outside a pod, host and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"
