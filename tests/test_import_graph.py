"""The package's import graph: printed (run with -s to see it), acyclic, and never running from
a lower layer to a higher one. Every import counts, including those inside functions and
under TYPE_CHECKING: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import dragoman

PACKAGE = Path(dragoman.__file__).parent

# Each top-level part of the package, by layer: an import may only reach a lower layer (or
# stay inside its own part). Parts on one layer are independent of each other.
LAYERS: tuple[frozenset[str], ...] = (
    # log_text: how untrusted strings are shown in logs, for every layer that logs them;
    # stop_signals: a main thread's wait for SIGTERM, for the demo and the commands.
    frozenset({"objects", "snapshots", "security", "log_text", "stop_signals"}),
    # The store holds what sources read, and knows its fields from the table of kinds in
    # objects/: neither imports the other, so a build depends on no parser.
    frozenset({"sources", "store"}),
    frozenset({"dag"}),
    frozenset({"envoy", "xds"}),
    frozenset({"runtime", "provisioning"}),
    frozenset({"kubernetes", "demo"}),
    frozenset({"commands"}),
    frozenset({"cli"}),
    frozenset({"__main__"}),
)
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def module_imports(root: Path) -> Iterator[tuple[str, str]]:
    """(importing module, imported dragoman module) for every import in the package."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{module}: relative import; the package uses absolute ones")
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            yield from ((module, name) for name in names if name.split(".")[0] == "dragoman")


def part_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def part_graph(root: Path) -> Counter[tuple[str, str]]:
    """Imports between top-level parts of the package, counted."""
    edges: Counter[tuple[str, str]] = Counter()
    for importer, imported in module_imports(root):
        a, b = part_of(importer), part_of(imported)
        if a and b and a != b:
            edges[(a, b)] += 1
    return edges


def cycle(edges: Mapping[tuple[str, str], int]) -> list[str]:
    """One cycle of the graph (its nodes, first repeated last), or [] when it has none."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for successor in graph.get(node, []):
            found = visit(successor, [*path, node])
            if found:
                return found
        done.add(node)
        return []

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return []


def upward(edges: Mapping[tuple[str, str], int]) -> list[str]:
    """Imports that do not run to a lower layer."""
    return [
        f"{a} imports {b}"
        for a, b in sorted(edges)
        if a not in RANK or b not in RANK or RANK[a] <= RANK[b]
    ]


def test_the_package_import_graph_is_layered_and_acyclic() -> None:
    edges = part_graph(PACKAGE)
    print("\ndragoman import graph (importer -> imported: imports)")
    for rank, parts in enumerate(LAYERS):
        for part in sorted(parts):
            targets = ", ".join(f"{b} {n}" for (a, b), n in sorted(edges.items()) if a == part)
            print(f"  {rank} {part:<10} -> {targets or '(nothing of dragoman)'}")
    assert cycle(edges) == []
    assert upward(edges) == []
    # The rules the layout names, spelled out.
    assert not {b for a, b in edges if a == "xds"} & {"dag", "envoy"}
    assert ("envoy", "xds") not in edges
    # Every part of the package is placed on a layer.
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    parts -= {"__init__", "__pycache__", "py"}
    assert parts <= set(RANK), sorted(parts - set(RANK))


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The same checks on a package made to break both rules."""
    root = tmp_path / "dragoman"
    for folder, source in {
        "xds": "from dragoman.envoy.translate import translate\n",
        "envoy": "from dragoman.xds.cache import SnapshotCache\n",
        "objects": "import dragoman.store\n",
    }.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
        (root / folder / "mod.py").write_text(source)
    edges = part_graph(root)
    assert set(edges) == {("xds", "envoy"), ("envoy", "xds"), ("objects", "store")}
    assert cycle(edges) == ["envoy", "xds", "envoy"]
    assert upward(edges) == [
        "envoy imports xds",
        "objects imports store",
        "xds imports envoy",
    ]


def test_no_test_file_imports_another() -> None:
    """Shared test code lives in tests/support/, never in a test module."""
    tests = Path(__file__).parent
    offenders = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            offenders += [
                f"{path.relative_to(tests)} imports {name}"
                for name in names
                if name.startswith("tests.") and name.rpartition(".")[2].startswith("test_")
            ]
    assert offenders == []


# The build stages of dag/, by order: a stage may import an earlier one, never a later one.
# The modules directly in dag/ (the model, the options, the build context and the inputs it
# carries) count as one stage, "dag", below every sub-package; dag/build.py, the full build,
# counts as "build", above them all: it is the incremental builder's first build.
DAG_STAGES: tuple[str, ...] = (
    "dag",
    "upstreams",
    "routes",
    "frontends",
    "node_groups",
    "proxyless",
    "status",
    "incremental",
    "build",
)


def stage_graph(root: Path) -> Counter[tuple[str, str]]:
    """Imports between the stages of dragoman.dag (as DAG_STAGES names them), counted."""
    dag = root / "dag"

    def stage(module: str) -> str:
        names = module.split(".")
        if names[1:2] != ["dag"] or len(names) < 3:
            return ""
        if (dag / names[2]).is_dir():
            return names[2]
        return "build" if names[2] == "build" else "dag"

    edges: Counter[tuple[str, str]] = Counter()
    for importer, imported in module_imports(root):
        a, b = stage(importer), stage(imported)
        if a and b and a != b:
            edges[(a, b)] += 1
    return edges


def later_stages(edges: Mapping[tuple[str, str], int]) -> list[str]:
    """Imports of a stage by an earlier one (or between stages not in DAG_STAGES)."""
    order = {stage: rank for rank, stage in enumerate(DAG_STAGES)}
    return [
        f"{a} imports {b}"
        for a, b in sorted(edges)
        if a not in order or b not in order or order[a] <= order[b]
    ]


def test_the_dag_stages_import_each_other_in_one_order() -> None:
    edges = stage_graph(PACKAGE)
    print("\ndragoman.dag stages (importer -> imported: imports)")
    for stage in DAG_STAGES:
        targets = ", ".join(f"{b} {n}" for (a, b), n in sorted(edges.items()) if a == stage)
        print(f"  {stage:<11} -> {targets or '(no other stage)'}")
    assert cycle(edges) == []
    assert later_stages(edges) == []
    stages = {p.name for p in (PACKAGE / "dag").iterdir() if (p / "__init__.py").exists()}
    assert stages == set(DAG_STAGES) - {"dag", "build"}


def test_the_stage_checks_catch_a_cycle_and_a_later_stage(tmp_path: Path) -> None:
    root = tmp_path / "dragoman"
    for folder, source in {
        "dag/routes": "from dragoman.dag.frontends.attachment import attach\n",
        "dag/frontends": "from dragoman.dag.routes.ranking import rank\n",
        "dag/upstreams": "from dragoman.dag.model import Cluster\nimport dragoman.dag.status.x\n",
        "dag/status": "",
        "dag/incremental": "from dragoman.dag.status.mod import x\n",
    }.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
        (root / folder / "mod.py").write_text(source)
    (root / "dag" / "model.py").write_text("")
    (root / "dag" / "build.py").write_text("from dragoman.dag.incremental.mod import x\n")
    edges = stage_graph(root)
    assert set(edges) == {
        ("routes", "frontends"),
        ("frontends", "routes"),
        ("upstreams", "dag"),
        ("upstreams", "status"),
        ("build", "incremental"),
        ("incremental", "status"),
    }
    assert cycle(edges) == ["frontends", "routes", "frontends"]
    assert later_stages(edges) == ["routes imports frontends", "upstreams imports status"]


def test_the_stage_checks_catch_a_top_level_dag_module_importing_a_stage(tmp_path: Path) -> None:
    """A module directly in dag/ sits below the stages: importing one is a cycle in waiting."""
    root = tmp_path / "dragoman"
    (root / "dag" / "upstreams").mkdir(parents=True)
    (root / "dag" / "__init__.py").write_text("")
    (root / "dag" / "upstreams" / "__init__.py").write_text("")
    (root / "dag" / "upstreams" / "mod.py").write_text("from dragoman.dag.context import C\n")
    (root / "dag" / "context.py").write_text("from dragoman.dag.upstreams.mod import Inputs\n")
    edges = stage_graph(root)
    assert set(edges) == {("upstreams", "dag"), ("dag", "upstreams")}
    assert cycle(edges) == ["dag", "upstreams", "dag"]
    assert later_stages(edges) == ["dag imports upstreams"]


# What a reader assumes of the layers, spelled out as rules on imported modules. Each names
# the dragoman modules a part may import: anything else it imports is a violation.
def _xds_reaches(root: Path, imported: str) -> bool:
    """xds serves opaque snapshots: of dragoman it imports snapshots/, security/ (client
    identities and TLS files, which certificate generation shares: a leaf of the bottom
    layer, importing nothing of dragoman) and log_text (how untrusted strings are shown in
    logs, shared by every layer that logs); nothing of sources, store, dag, envoy or
    runtime."""
    return part_of(imported) in {"xds", "snapshots", "security", "log_text"}


def _envoy_reaches(root: Path, imported: str) -> bool:
    """Translation reads the DAG's model, never a stage's inner workings or the build's
    inputs."""
    return part_of(imported) != "dag" or imported == "dragoman.dag.model"


def _store_reaches(root: Path, imported: str) -> bool:
    """The store knows its fields from the table of kinds in objects/, not from the parsers."""
    return part_of(imported) != "sources"


def _runtime_reaches(root: Path, imported: str) -> bool:
    """runtime drives the build through the DAG's public modules (the modules directly in
    dag/: the full build, the model, the options and the inputs the build carries) and the
    incremental builder; it never reaches into a stage."""
    names = imported.split(".")
    if names[1:2] != ["dag"] or len(names) == 2:
        return True
    if names[2:] in (["incremental"], ["incremental", "builder"]):
        return True
    return len(names) == 3 and not (root / "dag" / names[2]).is_dir()


IMPORT_RULES: dict[str, Callable[[Path, str], bool]] = {
    "xds": _xds_reaches,
    "envoy": _envoy_reaches,
    "store": _store_reaches,
    "runtime": _runtime_reaches,
}


def rule_violations(root: Path, part: str) -> list[str]:
    """The imports of `part` its rule refuses, as `importer imports imported`."""
    allowed = IMPORT_RULES[part]
    return sorted(
        {
            f"{importer} imports {imported}"
            for importer, imported in module_imports(root)
            if part_of(importer) == part and not allowed(root, imported)
        }
    )


def test_xds_imports_only_snapshots_security_and_log_text() -> None:
    """Beside snapshots, xds reads client identities and TLS files from security/ (which
    certificate generation shares: both must parse an identity and check a key file alike)
    and shows untrusted strings as log_text does; see _xds_reaches."""
    assert rule_violations(PACKAGE, "xds") == []


def test_envoy_reads_only_the_dag_model() -> None:
    assert rule_violations(PACKAGE, "envoy") == []


def test_the_store_imports_no_source() -> None:
    assert rule_violations(PACKAGE, "store") == []


def test_runtime_reaches_the_dag_only_through_its_public_modules() -> None:
    assert rule_violations(PACKAGE, "runtime") == []


def test_the_import_rules_catch_what_they_refuse(tmp_path: Path) -> None:
    root = tmp_path / "dragoman"
    for folder, source in {
        "xds": "from dragoman.snapshots.x import S\nimport dragoman.security.identities\n"
        "from dragoman.sources.shared import intern\n",
        "envoy": "from dragoman.dag.model import Dag\nfrom dragoman.dag.routes.rules import r\n",
        "runtime": "from dragoman.dag.build import build\n"
        "from dragoman.dag.incremental.builder import B\n"
        "from dragoman.dag.upstreams.endpoints import refresh\n"
        "from dragoman.dag.incremental.changes import store_changes\n",
    }.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
        (root / folder / "mod.py").write_text(source)
    (root / "dag" / "upstreams").mkdir(parents=True)
    (root / "store.py").write_text(
        "from dragoman.objects.kinds import KINDS\nimport dragoman.sources.kind_parsers\n"
    )
    assert rule_violations(root, "xds") == ["dragoman.xds.mod imports dragoman.sources.shared"]
    assert rule_violations(root, "envoy") == [
        "dragoman.envoy.mod imports dragoman.dag.routes.rules"
    ]
    assert rule_violations(root, "store") == [
        "dragoman.store imports dragoman.sources.kind_parsers"
    ]
    assert rule_violations(root, "runtime") == [
        "dragoman.runtime.mod imports dragoman.dag.incremental.changes",
        "dragoman.runtime.mod imports dragoman.dag.upstreams.endpoints",
    ]
