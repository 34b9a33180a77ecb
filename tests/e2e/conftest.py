"""Every end-to-end run ends with a scan of what it wrote (dragoman's and Envoy's logs, probe
output, rendered files) for private key material: none may be there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# Files tests write on purpose that may hold keys: manifests with Secrets, certificate and key
# files, Envoy bootstraps.
_KEY_FILES = {".key", ".yaml", ".yml", ".json", ".pem", ".crt"}


def leaked_keys(root: Path) -> list[str]:
    """Files under `root` that are not key or manifest files yet hold a private key."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix in _KEY_FILES or path.stat().st_size > 64 << 20:
            continue
        if b"PRIVATE KEY" in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


@pytest.fixture(scope="module", autouse=True)
def no_private_key_in_any_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Scans the temporary directories each end-to-end module made (tests run one after the
    other: what appears while a module runs is its own)."""
    base = tmp_path_factory.getbasetemp()
    before = set(base.iterdir())
    yield
    leaked = [
        found
        for directory in sorted(set(base.iterdir()) - before)
        for found in leaked_keys(directory)
    ]
    assert leaked == [], f"private key material in: {leaked}"
