"""A seeded fuzzer of manifest directories, and the checks every mutant must pass.

The every-feature manifest set (tests/support/feature_manifests.py), one document per file,
is mutated: types, lengths, nesting, encodings, control characters, aliases, Unicode, in
decoded documents and in the text itself. Each mutant is loaded, built and translated as
`dragoman serve` would; `check_outcome` holds it to the rules (no exception, bounded time and
memory, unmutated files still served, a problem reported for what was refused), and
`EnvoyBatch` collects every distinct resource served over all mutants so a few
`envoy --mode validate` runs check them all.

Used by tests/fuzz (a bounded, seeded slice) and benchmarks/fuzz.py (a long run).
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import time
import traceback
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf.wrappers_pb2 import BoolValue

from dragoman.dag.build import build
from dragoman.envoy import translate
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_config
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.sources.manifests import LoadResult, ManifestDirectory
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from tests.support.dag_invariants import invariant_violations
from tests.support.envoy_dags import messages
from tests.support.feature_manifests import every_feature_manifests

# Bounds every mutant must stay within (load + build + translate of the whole directory).
MAX_SECONDS = 10.0
MAX_PEAK_BYTES = 256 * 1024 * 1024

HOSTILE_STRINGS = (
    "",
    " ",
    "a\r\nInjected: yes",
    "bad\nvalue",
    "nul\x00byte",
    "\x1b[2Jescape",
    "tab\there",
    "\u202eright-to-left",
    "\u2028line-separator",
    "é",
    "日本語",
    "\U0001f600" * 64,
    "x" * 5000,
    "/" * 1025,
    "/" + "a/" * 600,
    "*",
    "*.",
    "..",
    "/..",
    "%2F",
    "%00",
    "host",
    "Host",
    ":authority",
    ":path",
    "(a+)+$",
    "[",
    "a{1000}",
    "\\",
    "-",
    "0",
    "1e9",
    "true",
    "null",
    "~",
    "127.0.0.1",
    "169.254.169.254",
    "::1",
    "localhost",
    "LOCALHOST.",
    "metadata.google.internal",
    "a" * 64,
    "a." * 130,
    "ExternalName",
    "kubernetes.io/h2c",
    "https",
    "HTTPS",
    "TLS",
    "RegularExpression",
    "PathPrefix",
    "ReplacePrefixMatch",
)
HOSTILE_NUMBERS = (0, -1, 1, 80, 65535, 65536, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64)
SCALARS: tuple[Any, ...] = (
    None,
    True,
    False,
    0.5,
    float("inf"),
    -0.0,
    [],
    {},
    "",
    [None],
    {"": ""},
)


@dataclass(frozen=True, slots=True)
class Mutant:
    index: int
    files: dict[str, bytes]  # file name -> content
    mutated_file: str
    description: str
    # True when the mutation may legitimately make an object vanish without a problem (its
    # kind, apiVersion or name changed, or the text was cut).
    may_drop_silently: bool = False


@dataclass
class Outcome:
    mutant: Mutant
    seconds: float = 0.0
    peak_bytes: int = 0
    result: LoadResult | None = None
    problems: int = 0
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def base_documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(every_feature_manifests()) if doc]


def file_name(index: int, doc: dict[str, Any]) -> str:
    return f"{index:02d}-{str(doc.get('kind', 'doc')).lower()}.yaml"


def base_files(documents: list[dict[str, Any]]) -> dict[str, bytes]:
    return {
        file_name(i, doc): yaml.safe_dump(doc, sort_keys=False).encode()
        for i, doc in enumerate(documents)
    }


def mutants(seed: int, count: int, start: int = 0) -> Iterator[Mutant]:
    """`count` mutants, the same ones for the same seed (and `start`, to resume)."""
    documents = base_documents()
    base = base_files(documents)
    names = list(base)
    weights = [4 if doc.get("kind", "").endswith(("Route", "Gateway")) else 1 for doc in documents]
    for index in range(start, start + count):
        rng = random.Random(f"{seed}/{index}")
        # Routes and Gateways hold most of what reaches Envoy: mutated more often.
        target = rng.choices(range(len(documents)), weights)[0]
        name = names[target]
        doc = json.loads(json.dumps(documents[target]))  # a deep copy
        files = dict(base)
        operation = rng.choice(_TEXT_OPERATIONS + _DOCUMENT_OPERATIONS * 4)
        if operation in _TEXT_OPERATIONS:
            new_name, content, description, silent = operation(rng, name, base[name], doc)
        else:
            # One to four edits of the same document: single ones rarely meet every check.
            edits = [operation(rng, doc)]
            for _ in range(rng.choice((0, 0, 1, 3))):
                # One repetition per mutant: repeating a list of repeated lists multiplies
                # (5,000 x 5,000 items) past what the generator itself can hold.
                others = [op for op in _DOCUMENT_OPERATIONS if op is not _repeat_list_item]
                edits.append(rng.choice(others)(rng, doc))
            description = "; ".join(text for text, _ in edits)
            silent = any(flag for _, flag in edits)
            new_name = name
            try:
                text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=rng.random() < 0.5)
            except RecursionError:  # PyYAML's dumper recurses; JSON is YAML too
                text = json.dumps(doc, ensure_ascii=False)
            content = text.encode("utf-8", "surrogatepass")
        del files[name]
        files[new_name] = content
        yield Mutant(index, files, new_name, f"{name}: {description}", silent)


# Mutations of a decoded document: each returns (description, may_drop_silently).


def _positions(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _positions(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _positions(child, (*path, index))


def _pick(rng: random.Random, doc: dict[str, Any]) -> tuple[Any, Any, tuple[Any, ...]]:
    """A random (container, key, path) inside doc, never the document itself."""
    positions = [path for path, _ in _positions(doc) if path]
    path = rng.choice(positions)
    container: Any = doc
    for step in path[:-1]:
        container = container[step]
    return container, path[-1], path


def _silent(path: tuple[Any, ...]) -> bool:
    return path[:1] in (("kind",), ("apiVersion",)) or path[:2] in (
        ("metadata", "name"),
        ("metadata", "namespace"),
    )


def _replace_with_scalar(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    container, key, path = _pick(rng, doc)
    value = rng.choice(SCALARS + HOSTILE_NUMBERS)
    container[key] = value
    return f"{_show(path)} = {value!r}", _silent(path)


# Keys whose strings end up in what Envoy is sent: edited more often.
_ENVOY_BOUND_KEYS = frozenset(
    {"value", "name", "hostname", "replaceFullPath", "replacePrefixMatch", "service", "method"}
)


def _replace_with_string(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    strings = [path for path, value in _positions(doc) if isinstance(value, str) and path]
    if strings and rng.random() < 0.8:  # mostly an edit of a string the object really has
        weights = [3 if path[-1] in _ENVOY_BOUND_KEYS else 1 for path in strings]
        path = rng.choices(strings, weights)[0]
        container: Any = doc
        for step in path[:-1]:
            container = container[step]
        key = path[-1]
    else:
        container, key, path = _pick(rng, doc)
    value = rng.choice(HOSTILE_STRINGS)
    old = container[key]
    if isinstance(old, str) and old and rng.random() < 0.5:
        cut = rng.randrange(len(old) + 1)
        value = old[:cut] + value + old[cut:]  # an edit of the real value
    container[key] = value
    return f"{_show(path)} = {value[:60]!r}", _silent(path)


def _replace_with_number(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    numbers = [path for path, value in _positions(doc) if isinstance(value, int) and path]
    path = rng.choice(numbers) if numbers else _pick(rng, doc)[2]
    container: Any = doc
    for step in path[:-1]:
        container = container[step]
    value = rng.choice(HOSTILE_NUMBERS)
    container[path[-1]] = value
    return f"{_show(path)} = {value}", _silent(path)


def _delete(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    container, key, path = _pick(rng, doc)
    del container[key]
    return f"del {_show(path)}", _silent(path)


def _repeat_list_item(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    lists = [path for path, value in _positions(doc) if isinstance(value, list) and value and path]
    if not lists:
        return _delete(rng, doc)
    path = rng.choice(lists)
    container: Any = doc
    for step in path:
        container = container[step]
    times = rng.choice((2, 17, 65, 129, 1001, 5000))
    container[:] = (container * times)[: max(times, len(container) * 2)]
    return f"{_show(path)} repeated to {len(container)} items", False


def _nest(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    container, key, path = _pick(rng, doc)
    depth = rng.choice((3, 20, 99, 150))  # deeper: the text mutations
    value: Any = container[key]
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"x": value}
    container[key] = value
    return f"{_show(path)} nested {depth} deep", _silent(path)


def _new_field(rng: random.Random, doc: dict[str, Any]) -> tuple[str, bool]:
    maps = [path for path, value in _positions(doc) if isinstance(value, dict)]
    path = rng.choice(maps)
    container: Any = doc
    for step in path:
        container = container[step]
    key = rng.choice(("unknown", "type", "value", "name", "port", "hostname", "path", "x" * 300))
    container[key] = rng.choice(HOSTILE_STRINGS + HOSTILE_NUMBERS)
    return f"{_show((*path, key))} added", _silent((*path, key))


_DOCUMENT_OPERATIONS = (
    _replace_with_scalar,
    _replace_with_string,
    _replace_with_string,
    _replace_with_number,
    _delete,
    _repeat_list_item,
    _nest,
    _new_field,
)


# Mutations of the text: each returns (file name, bytes, description, may_drop_silently).


def _deep_flow(
    rng: random.Random, name: str, text: bytes, doc: dict[str, Any]
) -> tuple[str, bytes, str, bool]:
    depth = rng.choice((101, 1000, 40_000))
    style = rng.choice(("flow", "block", "complex-key", "mapping"))
    if style == "flow":
        deep = "x: " + "[" * depth + "]" * depth + "\n"
    elif style == "block":
        deep = "x:\n" + "- " * depth + "a\n"
    elif style == "complex-key":
        deep = "? " * depth + "a\n"
    else:
        deep = "x: " + "{a: " * depth + "b" + "}" * depth + "\n"
    return name, text + b"---\n" + deep.encode(), f"a {style} document {depth} deep", False


def _alias_bomb(
    rng: random.Random, name: str, text: bytes, doc: dict[str, Any]
) -> tuple[str, bytes, str, bool]:
    levels = rng.choice((3, 6, 9, 12))
    width = rng.choice((3, 10))
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        items = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{items}]")
    bomb = "\n".join(lines) + "\n"
    if rng.random() < 0.5:
        return name, text + b"---\n" + bomb.encode(), f"alias bomb {width}^{levels}", False
    # Aliases inside the object itself: its lists become references to one anchored list.
    mutated = text.decode()
    mutated = "x-anchors:\n" + "".join(f"  {line}\n" for line in lines) + mutated
    return name, mutated.encode(), f"alias bomb {width}^{levels} inside the object", False


def _huge_integer(
    rng: random.Random, name: str, text: bytes, doc: dict[str, Any]
) -> tuple[str, bytes, str, bool]:
    digits = rng.choice((4301, 5000, 100_000))
    form = rng.choice(("decimal", "sexagesimal", "binary"))
    if form == "decimal":
        number = "9" * digits
    elif form == "sexagesimal":
        number = "1" + ":59" * (digits // 3)
    else:
        number = "0b" + "1" * digits
    mutated = text.replace(b"\n", f"\nhuge: {number}\n".encode(), 1)
    return name, mutated, f"a {form} integer of {len(number)} characters", False


def _bytes(
    rng: random.Random, name: str, text: bytes, doc: dict[str, Any]
) -> tuple[str, bytes, str, bool]:
    data = bytearray(text)
    choice = rng.choice(("flip", "invalid-utf8", "bom", "nul", "truncate", "tab", "crlf"))
    if choice == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice == "invalid-utf8":
        data[rng.randrange(len(data)) : 0] = b"\xff\xfe\xc3"
    elif choice == "bom":
        data[0:0] = "\ufeff".encode()
    elif choice == "nul":
        data[rng.randrange(len(data)) : 0] = b"\x00"
    elif choice == "truncate":
        del data[rng.randrange(len(data)) :]
    elif choice == "tab":
        data = bytearray(bytes(data).replace(b"  ", b"\t", 1))
    else:
        data = bytearray(bytes(data).replace(b"\n", b"\r\n"))
    return name, bytes(data), f"bytes: {choice}", choice in ("flip", "truncate")


def _json(
    rng: random.Random, name: str, text: bytes, doc: dict[str, Any]
) -> tuple[str, bytes, str, bool]:
    json_name = name.removesuffix(".yaml") + ".json"
    choice = rng.choice(("plain", "deep", "surrogate", "huge-int", "duplicate-key"))
    content = json.dumps(doc)
    if choice == "deep":
        depth = rng.choice((101, 5000, 100_000))
        content = content[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}"
    elif choice == "surrogate":
        content = content[:-1] + ', "x": "\\ud800"}'
    elif choice == "huge-int":
        content = content[:-1] + ', "x": ' + "9" * 5000 + "}"
    elif choice == "duplicate-key":
        content = content[:-1] + ', "kind": "Service"}'
    return json_name, content.encode(), f"as JSON: {choice}", False


_TEXT_OPERATIONS = (_deep_flow, _alias_bomb, _huge_integer, _bytes, _json)


def _show(path: tuple[Any, ...]) -> str:
    return ".".join(str(step) for step in path)


# Running a mutant and checking what became of it.


def run_mutant(mutant: Mutant, directory: Path) -> Outcome:
    """Write the mutant into (an empty) directory, then load, build and translate it."""
    for name, content in mutant.files.items():
        (directory / name).write_bytes(content)
    outcome = Outcome(mutant)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = ManifestDirectory(directory).load()
        dag = build(Store.from_objects(result.objects))
        outcome.snapshots = translate(dag)
        outcome.result = result
        outcome.problems = len(dag.problems)
        outcome.failures.extend(invariant_violations(dag))
    except Exception:
        outcome.failures.append("raised:\n" + traceback.format_exc())
    finally:
        outcome.seconds = time.perf_counter() - started
        outcome.peak_bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    for name in mutant.files:
        (directory / name).unlink()
    return outcome


def check_outcome(outcome: Outcome, expected: dict[str, set[str]]) -> list[str]:
    """Every rule the outcome breaks; `expected` maps each base file to the keys it defines."""
    failures = list(outcome.failures)
    if outcome.seconds > MAX_SECONDS:
        failures.append(f"took {outcome.seconds:.1f} s (at most {MAX_SECONDS})")
    if outcome.peak_bytes > MAX_PEAK_BYTES:
        failures.append(f"peaked at {outcome.peak_bytes >> 20} MiB")
    result = outcome.result
    if result is None:
        return failures
    loaded = {str(obj.key) for obj in result.objects}
    mutated = outcome.mutant.mutated_file
    redefined = {e.object for e in result.errors if "already defined" in e.message}
    for name, keys in expected.items():
        if name.rsplit(".", 1)[0] == mutated.rsplit(".", 1)[0]:
            missing = keys - loaded
            reported = any(e.origin.startswith(mutated) for e in result.errors)
            if missing and not reported and not outcome.mutant.may_drop_silently:
                failures.append(f"{sorted(missing)} vanished from {mutated} with no problem")
        else:
            missing = keys - loaded - redefined
            if missing:
                failures.append(f"{sorted(missing)} of the unmutated {name} are not served")
    return failures


def expected_keys() -> dict[str, set[str]]:
    """Each base file and the keys (`kind/ns/name`) of the objects it defines."""
    keys: dict[str, set[str]] = {}
    for index, doc in enumerate(base_documents()):
        parsed = parse_object(doc)
        assert parsed is not None, doc
        keys.setdefault(file_name(index, doc), set()).add(str(parsed.key))
    return keys


# Envoy validation of every distinct resource served, in few runs.


@dataclass
class EnvoyBatch:
    """Distinct resources over many mutants, each remembered with the first mutant that
    produced it, renamed and re-ported so they can share one bootstrap."""

    listeners: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    clusters: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        origin = f"mutant {outcome.mutant.index} ({outcome.mutant.description})"
        for snapshot in outcome.snapshots.values():
            tables = {t.name: t for t in messages(snapshot, ROUTE)}
            for listener in messages(snapshot, LISTENER):
                inline = _inline(listener, tables)
                key = hashlib.sha256(inline.SerializeToString(deterministic=True)).hexdigest()
                if key not in self.listeners:
                    self.listeners[key] = (to_json_mapping(inline), origin)
            for cluster in messages(snapshot, CLUSTER):
                key = hashlib.sha256(cluster.SerializeToString(deterministic=True)).hexdigest()
                if key not in self.clusters:
                    self.clusters[key] = (to_json_mapping(cluster), origin)
            for assignment in messages(snapshot, ENDPOINT):
                mapping = {
                    "name": assignment.cluster_name,
                    "type": "STATIC",
                    "load_assignment": to_json_mapping(assignment),
                }
                key = hashlib.sha256(json.dumps(mapping, sort_keys=True).encode()).hexdigest()
                if key not in self.clusters:
                    self.clusters[key] = (mapping, origin)

    def items(self) -> list[tuple[str, dict[str, Any], str]]:
        return [("listener", *v) for v in self.listeners.values()] + [
            ("cluster", *v) for v in self.clusters.values()
        ]

    def validate(self, envoy: str, workdir: Path, per_config: int = 400) -> tuple[int, list[str]]:
        """(Envoy runs, what Envoy refused): each refused resource with the mutant that made
        it and Envoy's reason. A failing batch is split until each refusal is found (Envoy
        stops at the first one)."""
        runs = 0
        refused: list[str] = []
        pending = [
            self.items()[start : start + per_config]
            for start in range(0, len(self.items()), per_config)
        ]
        while pending:
            items = pending.pop()
            config, origins = _bootstrap(items, workdir / "admin.sock")
            runs += 1
            output = envoy_validate(envoy, config, workdir / f"validate-{runs}.yaml")
            if output is None:
                continue
            if len(items) == 1:
                reason = output.strip().splitlines()[-1] if output.strip() else output
                refused.append(f"{origins[0]}: {reason[-800:]}")
            else:
                half = len(items) // 2
                pending += [items[:half], items[half:]]
        return runs, refused


def _inline(
    listener: listener_pb2.Listener, tables: dict[str, route_pb2.RouteConfiguration]
) -> listener_pb2.Listener:
    """A copy with every RDS reference replaced by its route table, cluster checks off (the
    clusters are validated on their own, under other names)."""
    copy = listener_pb2.Listener()
    copy.CopyFrom(listener)
    for chain in [*copy.filter_chains, copy.default_filter_chain]:
        for network_filter in chain.filters:
            manager = hcm_pb2.HttpConnectionManager()
            if not network_filter.typed_config.Unpack(manager):
                continue
            if manager.HasField("rds") and manager.rds.route_config_name in tables:
                manager.route_config.CopyFrom(tables[manager.rds.route_config_name])
                manager.route_config.validate_clusters.CopyFrom(BoolValue(value=False))
                network_filter.typed_config.Pack(manager)
    return copy


def _bootstrap(
    items: list[tuple[str, dict[str, Any], str]], admin_socket: Path
) -> tuple[dict[str, Any], list[str]]:
    config = bootstrap_config(
        "127.0.0.1:18000",
        node_id="fuzz",
        node_cluster="default/fuzz",
        admin_socket=str(admin_socket),
    )
    static = config["static_resources"]
    static.setdefault("listeners", [])
    origins = []
    for index, (kind, mapping, origin) in enumerate(items):
        copy = json.loads(json.dumps(mapping))
        copy["name"] = f"fuzz-{index}/{copy['name']}"
        if kind == "listener":
            copy["address"]["socket_address"]["port_value"] = 20000 + index
            static["listeners"].append(copy)
        else:
            if "load_assignment" in copy:
                copy["load_assignment"]["cluster_name"] = copy["name"]
            static["clusters"].append(copy)
        origins.append(f"{kind} {copy['name']} from {origin}")
    return config, origins


def envoy_validate(envoy: str, config: dict[str, Any], path: Path) -> str | None:
    """None when Envoy accepts `config`, else its output."""
    path.write_text(dump_yaml(config))
    result = subprocess.run(
        [envoy, "--mode", "validate", "--disable-hot-restart", "-c", str(path), "-l", "error"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode == 0:
        return None
    return (result.stdout + result.stderr)[-4000:]
