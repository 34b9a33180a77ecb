"""A directory laid out as the kubelet lays out a ConfigMap volume."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def configmap_volume(root: Path, generation: str, files: dict[str, str]) -> None:
    """Lay out (or update) a directory as the kubelet lays out a ConfigMap volume: the data
    in a hidden timestamped directory, `..data` a symbolic link to it, swapped atomically by
    renaming a new link over it, and each key a symbolic link through `..data`."""
    data = root / f"..{generation}"
    data.mkdir()
    for name, text in files.items():
        (data / name).write_text(text)
    (root / "..data_tmp").symlink_to(data.name)
    old = os.readlink(root / "..data") if (root / "..data").is_symlink() else None
    os.rename(root / "..data_tmp", root / "..data")
    for name in files:
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"..data/{name}")
    for link in root.iterdir():
        if link.is_symlink() and link.name != "..data" and link.name not in files:
            link.unlink()  # a key removed from the ConfigMap
    if old is not None:
        shutil.rmtree(root / old)
