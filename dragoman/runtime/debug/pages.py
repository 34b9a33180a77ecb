"""The /debug pages from a DebugView: an HTML page with an inline SVG picture (no script, no
external asset: it works offline and under a strict Content-Security-Policy), the same
graph as Graphviz DOT, and the served resources as YAML with keys redacted."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping

import dragoman
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.runtime.debug.graph import COLUMNS, Graph, Node, build_graph
from dragoman.runtime.debug.view import DebugView

# Drawing geometry, in SVG user units.
COLUMN_WIDTH = 250
BOX_WIDTH = 210
LINE_HEIGHT = 14
BOX_PADDING = 6
GAP = 10
TOP = 30
MAX_LABEL = 34  # characters of a label line before it is cut with an ellipsis

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """Text from objects and clients, with control characters made visible: they must not
    reach a terminal or break a line of the DOT output."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def escape(text: str) -> str:
    return html.escape(clean(text), quote=True)


def _cut(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------- DOT


def _dot_quote(text: str) -> str:
    return '"' + clean(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(view: DebugView, query: Mapping[str, str] | None = None) -> tuple[str, str]:
    graph = build_graph(view)
    lines = ["digraph dragoman {", "  rankdir=LR;", '  node [shape=box, fontname="sans-serif"];']
    for index, title in enumerate(COLUMNS):
        nodes = graph.column(index)
        if not nodes:
            continue
        lines.append(f"  subgraph {_dot_quote('cluster_' + title.lower())} {{")
        lines.append(f"    label={_dot_quote(title)};")
        for node in nodes:
            label = "\n".join([node.label, *node.details, *(f"! {p}" for p in node.problems)])
            style = ', color="red"' if node.problems or node.refused else ""
            lines.append(f"    {_dot_quote(node.id)} [label={_dot_quote(label)}{style}];")
        lines.append("  }")
    for source, target in sorted(graph.edges):
        lines.append(f"  {_dot_quote(source)} -> {_dot_quote(target)};")
    lines.append("}")
    return "text/vnd.graphviz; charset=utf-8", "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- config


# Resources shown per node group and type unless `?limit=N` asks for more: decoding and
# printing 10,000 clusters takes seconds of the process' time, which xDS needs too.
CONFIG_LIMIT = 100
MAX_CONFIG_LIMIT = 100_000


def config(view: DebugView, query: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The served resources by node group and type, as `dragoman render` prints them (keys
    redacted), the first `limit` of each type by name."""
    from dragoman.envoy.text.json_mapping import to_json_mapping
    from dragoman.envoy.text.snapshot_yaml import SECTIONS, redacted
    from dragoman.envoy.text.yaml_text import dump_yaml

    limit = _limit((query or {}).get("limit"))
    parts = []
    for name in sorted(view.snapshots):
        snapshot = view.snapshots[name]
        document: dict[str, object] = {"group": name}
        for section, type_url, message_class in SECTIONS:
            resources = snapshot.of_type(type_url).resources
            names = sorted(resources)
            document[section] = [
                redacted(to_json_mapping(message_class.FromString(resources[key].body)))
                for key in names[:limit]
            ]
            if len(names) > limit:
                document[f"{section}_omitted"] = len(names) - limit
        label = "all gateways" if name == ALL_GATEWAYS else f"gateway {name}"
        parts.append(f"---\n# node group: {label}\n{dump_yaml(document)}")
    note = f"# the first {limit} resources of each type; ?limit=N for more\n"
    return "text/plain; charset=utf-8", note + "".join(parts)


def _limit(text: str | None) -> int:
    if text is None or not text.isdigit():
        return CONFIG_LIMIT
    return max(1, min(int(text), MAX_CONFIG_LIMIT))


# ------------------------------------------------------------------------ HTML


def _box_height(node: Node) -> int:
    return (1 + len(node.details) + len(node.problems)) * LINE_HEIGHT + 2 * BOX_PADDING


def svg(graph: Graph) -> str:
    positions: dict[str, tuple[int, int, int]] = {}  # id: x, y, height
    height = TOP
    for index in range(len(COLUMNS)):
        y = TOP
        for node in graph.column(index):
            box = _box_height(node)
            positions[node.id] = (index * COLUMN_WIDTH + 10, y, box)
            y += box + GAP
        if graph.hidden[index]:
            y += LINE_HEIGHT + GAP
        height = max(height, y)
    width = len(COLUMNS) * COLUMN_WIDTH
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="what dragoman serves">'
    ]
    for index, title in enumerate(COLUMNS):
        x = index * COLUMN_WIDTH + 10
        parts.append(f'<text x="{x}" y="18" class="col">{escape(title)}</text>')
        if graph.hidden[index]:
            parts.append(
                f'<text x="{x}" y="{height - 6}" class="more">and {graph.hidden[index]} more '
                "(see /debug/dag)</text>"
            )
    for source, target in sorted(graph.edges):
        x1, y1, h1 = positions[source]
        x2, y2, h2 = positions[target]
        start_x, start_y = x1 + BOX_WIDTH, y1 + h1 // 2
        end_x, end_y = x2, y2 + h2 // 2
        middle = (start_x + end_x) // 2
        parts.append(
            f'<path d="M{start_x},{start_y} C{middle},{start_y} {middle},{end_y} {end_x},{end_y}"'
            ' class="edge"/>'
        )
    for node in graph.nodes.values():
        x, y, box = positions[node.id]
        kind = "bad" if node.problems or node.refused else "ok"
        parts.append(f'<g class="node {kind}"><title>{escape(node.id)}</title>')
        parts.append(f'<rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{box}" rx="4"/>')
        line_y = y + BOX_PADDING + LINE_HEIGHT - 3
        lines = [
            (node.label, "label"),
            *((d, "detail") for d in node.details),
            *((p, "problem") for p in node.problems),
        ]
        for text, css in lines:
            shown = escape(_cut(text))
            parts.append(f'<text x="{x + BOX_PADDING}" y="{line_y}" class="{css}">{shown}</text>')
            line_y += LINE_HEIGHT
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


STYLE = """
body { font-family: sans-serif; margin: 1em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top;
  font-size: 0.9em; }
.bad, .problem { color: #b00020; }
svg text { font-size: 11px; font-family: sans-serif; fill: #222; }
svg text.col { font-weight: bold; font-size: 13px; }
svg text.problem { fill: #b00020; }
svg text.detail, svg text.more { fill: #555; }
svg rect { fill: #f4f7fb; stroke: #5b7db1; }
svg g.bad rect { fill: #fdeeee; stroke: #b00020; }
svg .edge { fill: none; stroke: #8899aa; stroke-width: 1; }
code { font-size: 0.9em; }
"""


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], css: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f'<table class="{css}"><tr>{head}</tr>{body}</table>'


def page(view: DebugView, query: Mapping[str, str] | None = None) -> tuple[str, str]:
    dag = view.dag
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dragoman {escape(dragoman.__version__)}: what is served</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>dragoman {escape(dragoman.__version__)}: what is served</h1>",
    ]
    if dag is None:
        sections.append("<p>Nothing built yet.</p>")
    else:
        groups = sorted(name or "(all gateways)" for name in dag.groups if name != ALL_GATEWAYS)
        sections.append(
            f"<p>{len(groups)} Gateways, {len(dag.clusters)} clusters, "
            f"{len(dag.problems)} problems, {len(view.streams)} xDS streams. "
            'Also: <a href="/debug/dag">DOT graph</a>, <a href="/debug/config">resources</a>, '
            '<a href="/metrics">metrics</a>.</p>'
        )
    sections.append(f'<div id="graph">{svg(build_graph(view))}</div>')
    sections.append('<h2 id="problems">Problems</h2>')
    sections.append(_problems(view))
    sections.append('<h2 id="external-names">External names</h2>')
    sections.append(_external_names(view))
    sections.append('<h2 id="clients">Connected clients</h2>')
    sections.append(_clients(view))
    sections.append("</body></html>")
    return "text/html; charset=utf-8", "\n".join(sections) + "\n"


def _problems(view: DebugView) -> str:
    problems = [
        (str(p.object), p.field, p.reason, p.message)
        for p in (view.dag.problems if view.dag else ())
    ]
    problems += [("(source)", "", "Invalid", error) for error in view.source_errors]
    if not problems:
        return "<p>None.</p>"
    return _table(("object", "field", "reason", "message"), problems, "bad")


def _external_names(view: DebugView) -> str:
    """Each ExternalName Service: its state, what the DNS check saw, and why it is refused."""
    names = []
    services = view.store.services if view.store is not None else {}
    dag_problems = view.dag.problems if view.dag else ()
    for key, state in sorted(view.external_names.items(), key=lambda item: str(item[0])):
        service = services.get((key.namespace, key.name))
        hostname = service.external_name if service is not None else ""
        observation = view.dns.get(hostname.rstrip(".").lower())
        if observation is None:
            checked = "not checked" if view.dns_check else "DNS check off"
        elif observation.error is not None:
            checked = f"{observation.error} (last good: {', '.join(observation.addresses) or '-'})"
        else:
            checked = ", ".join(observation.addresses)
        reasons = "; ".join(
            f"{p.message} ({p.reason})"
            for p in dag_problems
            if hostname and hostname.rstrip(".").lower() in p.message.lower()
        )
        names.append((str(key), hostname, state, checked, reasons))
    if not names:
        return "<p>None.</p>"
    return _table(("Service", "external name", "state", "DNS check", "reasons"), names)


def _clients(view: DebugView) -> str:
    """Each connected stream's types: the versions sent and ACKed, and the last answer."""
    rows = [
        (
            stream.node_id,
            stream.node_cluster,
            stream.client,
            f"{stream.service}{' (delta)' if stream.delta else ''}",
            stream.peer,
            served.type,
            served.sent_version[:12],
            served.acked_version[:12],
            f"NACK: {served.nack}" if served.nack else "ACK",
        )
        for stream in view.streams
        for served in stream.types or ()
    ]
    if not rows:
        return "<p>None connected.</p>"
    return _table(
        ("node", "cluster", "client", "stream", "peer", "type", "sent", "ACKed", "last answer"),
        rows,
    )


# Each page: the view and the query parameters in, (content type, text) out.
PAGES: dict[str, Callable[[DebugView, Mapping[str, str]], tuple[str, str]]] = {
    "/debug": page,
    "/debug/dag": dot,
    "/debug/config": config,
}
