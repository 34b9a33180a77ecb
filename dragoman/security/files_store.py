"""`dragoman certgen --out DIR`: the CA and pairs as PEM files, keys readable by their owner only.

Files are written next to their final name and renamed over it, so a reader never sees half
a file; what is still good is kept (see `certgen.renew`). `ca.crt` is the trust bundle: the
CA that signs, then, while a renewal overlaps, the one it replaced; `ca.key` is the key of
the first.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from dragoman.security.certgen import CA_FILE, CA_KEY_FILE, RENEW_BEFORE, renew


def write_files(
    directory: Path,
    *,
    server_names: Sequence[str],
    gateways: Iterable[str] = (),
    grpc_clients: Iterable[str] = (),
    days: int,
    renew_before: datetime.timedelta = RENEW_BEFORE,
    now: datetime.datetime | None = None,
) -> list[tuple[str, str]]:
    """Write `ca.crt`, `ca.key` and `<stem>.crt`/`<stem>.key` per pair into `directory`.

    Returns (file, "written" or "kept") for each certificate file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    wanted_gateways, wanted_grpc = list(gateways), list(grpc_clients)
    existing_ca = _read_pair(directory / CA_FILE, directory / CA_KEY_FILE)
    existing: dict[str, tuple[bytes, bytes]] = {}
    for crt in directory.glob("*.crt"):
        found = _read_pair(crt, crt.with_suffix(".key"))
        if found is not None and crt.name != CA_FILE:
            existing[crt.stem] = found
    issued = renew(
        existing_ca,
        existing,
        server_names,
        wanted_gateways,
        wanted_grpc,
        days,
        renew_before=renew_before,
        now=now,
    )
    report: list[tuple[str, str]] = []
    ca = issued.authority.pair
    if not issued.authority_kept:
        _write(directory / CA_KEY_FILE, ca.private_key, private=True)
    bundle_kept = existing_ca is not None and existing_ca[0] == issued.trust_bundle
    if not bundle_kept:
        _write(directory / CA_FILE, issued.trust_bundle, private=False)
    kept = issued.authority_kept and bundle_kept
    report.append((str(directory / CA_FILE), "kept" if kept else "written"))
    for pair, kept in issued.pairs:
        crt, key = directory / f"{pair.name}.crt", directory / f"{pair.name}.key"
        if not kept:
            _write(key, pair.private_key, private=True)
            _write(crt, pair.certificate, private=False)
        report.append((str(crt), "kept" if kept else "written"))
    return report


def _read_pair(crt: Path, key: Path) -> tuple[bytes, bytes] | None:
    try:
        return crt.read_bytes(), key.read_bytes()
    except OSError:
        return None


def _write(path: Path, data: bytes, *, private: bool) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    descriptor = os.open(temporary, flags, 0o600 if private else 0o644)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, path)
