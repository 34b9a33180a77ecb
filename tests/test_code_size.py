"""Size bounds a reader can rely on: no class over 300 lines and no function over 80 in the
package (a longer one mixes jobs that want names of their own)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import dragoman

PACKAGE = Path(dragoman.__file__).parent
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 80


def oversized(root: Path) -> Iterator[str]:
    """`path:line name (N lines)` for every class and function over its bound."""
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bound = MAX_CLASS_LINES
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                bound = MAX_FUNCTION_LINES
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > bound:
                yield f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)"


def test_no_class_or_function_of_the_package_is_over_its_bound() -> None:
    assert list(oversized(PACKAGE)) == []


def test_the_check_finds_a_long_function_and_a_long_class(tmp_path: Path) -> None:
    package = tmp_path / "made"
    package.mkdir()
    body = "".join(f"    x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text(f"def long():\n{body}\n\ndef short():\n    return 1\n")
    methods = "".join(f"    def m{n}(self):\n        return {n}\n\n" for n in range(101))
    (package / "big.py").write_text(f"class Big:\n{methods}")
    found = list(oversized(package))
    assert found == ["made/big.py:1 Big (303 lines)", "made/long.py:1 long (81 lines)"]
