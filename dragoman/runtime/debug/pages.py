"""The /debug pages from a DebugView: an HTML page with an inline SVG picture that fits the
window, the same graph as Graphviz DOT, and the served resources as YAML with keys redacted.

The page fetches nothing from elsewhere (it works offline) and runs under a strict
Content-Security-Policy: its one style sheet and its one script are inline and allowed by
their hashes alone, and the script may fetch nothing but the page itself (to refresh what
it shows without a reload)."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Callable, Iterable, Mapping

import dragoman
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.runtime.debug.graph import (
    COLUMNS,
    ROUTE,
    Graph,
    Node,
    build_graph,
    problem_line,
)
from dragoman.runtime.debug.view import DebugView

# Drawing geometry, in SVG user units (the picture is scaled to the window's width).
BOX_WIDTH = 200
COLUMN_GAP = 26
LABEL_GAP = 150  # between routes and Services, where the edges' labels are written
LINE_HEIGHT = 14
BOX_PADDING = 6
GAP = 10
TOP = 30
LEFT = 10
MAX_LABEL = 33  # characters of a label line before it is cut with an ellipsis
MAX_EDGE_LABEL = 27
EDGE_LABEL_LINES = 4  # lines of an edge's label drawn; all of them in its tooltip
LABELLED_EDGES_IN = 8  # edges into one box drawn with their labels (the rest: tooltips)

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
        labels = graph.edge_labels.get((source, target))
        label = f" [label={_dot_quote(chr(10).join(labels))}]" if labels else ""
        lines.append(f"  {_dot_quote(source)} -> {_dot_quote(target)}{label};")
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
    lines = 1 + len(node.details) + len(node.problems) + len(node.muted)
    return lines * LINE_HEIGHT + 2 * BOX_PADDING


def column_x() -> list[int]:
    """Where each column starts: the gap after the routes is wide enough for edge labels."""
    starts, x = [], LEFT
    for index in range(len(COLUMNS)):
        starts.append(x)
        x += BOX_WIDTH + (LABEL_GAP if index == ROUTE else COLUMN_GAP)
    return starts


def problem_anchor(line: str) -> str:
    """The id of a problem's row in the table, which its line in the picture links to."""
    return "problem-" + hashlib.sha256(clean(line).encode()).hexdigest()[:12]


def svg(graph: Graph) -> str:
    starts = column_x()
    lines = {edge: _label_lines(graph.edge_labels.get(edge, [])) for edge in graph.edges}
    incoming: dict[str, list[tuple[str, str]]] = {}
    for edge in sorted(graph.edges):
        if lines[edge]:
            incoming.setdefault(edge[1], []).append(edge)
    positions: dict[str, tuple[int, int, int]] = {}  # id: x, y, height
    ends: dict[tuple[str, str], int] = {}  # a labelled edge: the y where it meets its label
    height = TOP
    for index in range(len(COLUMNS)):
        y = TOP
        for node in graph.column(index):
            # Each labelled edge into the node ends at its own label, left of the box: the box
            # is as tall as its labels, so labels of different nodes never overlap.
            arriving = _labelled(incoming.get(node.id, []), positions, lines)
            labels = sum(len(lines[edge]) for edge in arriving)
            box = max(_box_height(node), labels * LINE_HEIGHT + 2 * BOX_PADDING)
            positions[node.id] = (starts[index], y, box)
            line_y = y + BOX_PADDING + LINE_HEIGHT // 2
            for edge in arriving:
                ends[edge] = line_y
                line_y += len(lines[edge]) * LINE_HEIGHT
            y += box + GAP
        if graph.hidden[index]:
            y += LINE_HEIGHT + GAP
        height = max(height, y)
    width = starts[-1] + BOX_WIDTH + LEFT
    # Width and height give the intrinsic size; the style sheet scales it to the window.
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="what dragoman serves">'
    ]
    for index, title in enumerate(COLUMNS):
        x = starts[index]
        parts.append(f'<text x="{x}" y="18" class="col">{escape(title)}</text>')
        if graph.hidden[index]:
            parts.append(
                f'<text x="{x}" y="{height - 6}" class="more">and {graph.hidden[index]} more '
                "(see /debug/dag)</text>"
            )
    for edge in sorted(graph.edges):
        shown = lines[edge] if edge in ends else []
        parts.append(_edge(edge, positions, ends.get(edge), shown, graph.edge_labels[edge]))
    for node in graph.nodes.values():
        parts.append(_node(node, positions[node.id]))
    parts.append("</svg>")
    return "".join(parts)


def _label_lines(labels: list[str]) -> list[str]:
    """An edge's label as drawn: a match and a weight share each on a line of their own (the
    gap is narrow), at most EDGE_LABEL_LINES lines."""
    lines = [part for label in labels for part in label.split(" · ")]
    if len(lines) > EDGE_LABEL_LINES:
        lines = [*lines[: EDGE_LABEL_LINES - 1], f"and {len(lines) - EDGE_LABEL_LINES + 1} more"]
    return lines


def _labelled(
    edges: list[tuple[str, str]],
    positions: Mapping[str, tuple[int, int, int]],
    lines: Mapping[tuple[str, str], list[str]],
) -> list[tuple[str, str]]:
    """The labelled edges into a node whose labels are drawn, top to bottom in the order of
    their sources (so they do not cross); the others keep theirs in the tooltip."""
    ordered = sorted(edges, key=lambda edge: (positions[edge[0]][1], edge[0]))
    return ordered[:LABELLED_EDGES_IN]


def _edge(
    edge: tuple[str, str],
    positions: Mapping[str, tuple[int, int, int]],
    end: int | None,
    shown: list[str],
    labels: list[str],
) -> str:
    x1, y1, h1 = positions[edge[0]]
    x2, y2, h2 = positions[edge[1]]
    start_x, start_y = x1 + BOX_WIDTH, y1 + h1 // 2
    end_x, end_y = x2, y2 + h2 // 2 if end is None else end
    middle = (start_x + end_x) // 2
    path = (
        f'<path d="M{start_x},{start_y} C{middle},{start_y} {middle},{end_y} {end_x},{end_y}"'
        ' class="edge"/>'
    )
    if not labels:
        return path
    # Right-aligned against the box the edge reaches, the first line on the edge's end.
    texts = []
    y = end_y - 3
    for line in shown:
        texts.append(
            f'<text x="{end_x - 4}" y="{y}" class="edge-label">'
            f"{escape(_cut(line, MAX_EDGE_LABEL))}</text>"
        )
        y += LINE_HEIGHT
    title = escape(f"{edge[0]} → {edge[1]}: " + "; ".join(labels))
    return f'<g class="labelled"><title>{title}</title>{path}{"".join(texts)}</g>'


def _node(node: Node, position: tuple[int, int, int]) -> str:
    x, y, box = position
    kind = "bad" if node.problems or node.refused else "idle" if node.idle else "ok"
    parts = [f'<g class="node {kind}"><title>{escape(node.id)}</title>']
    parts.append(f'<rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{box}" rx="4"/>')
    line_y = y + BOX_PADDING + LINE_HEIGHT - 3
    lines = [
        (node.label, "label"),
        *((d, "detail") for d in node.details),
        *((m, "muted") for m in node.muted),
    ]
    for text, css in lines:
        shown = escape(_cut(text))
        parts.append(f'<text x="{x + BOX_PADDING}" y="{line_y}" class="{css}">{shown}</text>')
        line_y += LINE_HEIGHT
    for problem in node.problems:
        # Cut to fit the box; the whole text is the tooltip and the row it links to.
        parts.append(
            f'<a href="#{problem_anchor(problem)}"><text x="{x + BOX_PADDING}" y="{line_y}" '
            f'class="problem"><title>{escape(problem)}</title>{escape(_cut(problem))}</text></a>'
        )
        line_y += LINE_HEIGHT
    parts.append("</g>")
    return "".join(parts)


STYLE = """
body { font-family: sans-serif; margin: 1em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top;
  font-size: 0.9em; overflow-wrap: break-word; }
tr:target { background: #fff3c4; }
.bad, .problem { color: #b00020; }
.controls { color: #555; font-size: 0.9em; }
#graph svg { display: block; width: 100%; height: auto; }
svg text { font-size: 11px; font-family: sans-serif; fill: #222; }
svg text.col { font-weight: bold; font-size: 13px; }
svg text.problem { fill: #b00020; text-decoration: underline dotted; }
svg text.detail, svg text.more { fill: #555; }
svg text.muted { fill: #999; }
svg text.edge-label { font-size: 10px; fill: #345; text-anchor: end;
  paint-order: stroke; stroke: #fff; stroke-width: 3px; }
svg rect { fill: #f4f7fb; stroke: #5b7db1; }
svg g.bad rect { fill: #fdeeee; stroke: #b00020; }
svg g.idle rect { fill: #f2f2f2; stroke: #aaa; stroke-dasharray: 4 3; }
svg g.idle text { fill: #999; }
svg .edge { fill: none; stroke: #8899aa; stroke-width: 1; }
code { font-size: 0.9em; }
"""

# Refreshes what the page shows (the element #live) from the page itself every
# data-refresh seconds while the box is ticked, keeping open <details> open: no reload,
# no scroll jump. It only ever fetches its own address.
REFRESH_SCRIPT = """
(() => {
  const body = document.body;
  const period = Number(body.dataset.refresh) || 5;
  const box = document.getElementById("refresh");
  const note = document.getElementById("refreshed");
  let refreshes = 0;
  async function refresh() {
    if (!box.checked) return;
    try {
      const answer = await fetch(location.href, {cache: "no-store"});
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.getElementById("live");
      if (fresh === null) throw new Error("not a debug page");
      const live = document.getElementById("live");
      const open = new Set(Array.from(live.querySelectorAll("details[open]"), d => d.id));
      fresh.querySelectorAll("details").forEach(d => { d.open = open.has(d.id); });
      live.replaceWith(document.adoptNode(fresh));
      refreshes += 1;
      body.dataset.refreshes = String(refreshes);
      note.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (error) {
      note.textContent = "could not refresh: " + error.message;
    }
  }
  setInterval(refresh, period * 1000);
})();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# What the page may do: apply its own style sheet and run its own script (by their hashes,
# so no injected markup can add either), fetch its own address, nothing else.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src {_csp_hash(STYLE)}; script-src {_csp_hash(REFRESH_SCRIPT)}; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
DEFAULT_REFRESH_S = 5
MAX_REFRESH_S = 3600


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], css: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f'<table class="{css}"><tr>{head}</tr>{body}</table>'


def page(view: DebugView, query: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The page: `?refresh=N` refreshes what it shows every N seconds (0: not until asked)."""
    refresh = _refresh_period((query or {}).get("refresh"))
    version = escape(dragoman.__version__)
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>dragoman {version}: what is served</title>",
        f"<style>{STYLE}</style></head>",
        f'<body data-refresh="{refresh or DEFAULT_REFRESH_S}">',
        f"<h1>dragoman {version}: what is served</h1>",
        '<p class="controls"><label><input type="checkbox" id="refresh"'
        f"{' checked' if refresh else ''}> refresh every {refresh or DEFAULT_REFRESH_S} s"
        '</label> <span id="refreshed"></span></p>',
        '<div id="live">',
        *_live(view),
        "</div>",
        f"<script>{REFRESH_SCRIPT}</script>",
        "</body></html>",
    ]
    return "text/html; charset=utf-8", "\n".join(sections) + "\n"


def _refresh_period(text: str | None) -> int:
    if text is None or not text.isdigit():
        return DEFAULT_REFRESH_S
    return min(int(text), MAX_REFRESH_S)


def _live(view: DebugView) -> list[str]:
    """What the page shows of the view: replaced whole on each refresh."""
    dag = view.dag
    sections = []
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
    return sections


# A problem message longer than this shows its start, and the rest on demand.
SHORT_MESSAGE = 160


def _problems(view: DebugView) -> str:
    problems = [
        (str(p.object), p.field, p.reason, p.message, problem_anchor(problem_line(p)))
        for p in (view.dag.problems if view.dag else ())
    ]
    problems += [
        ("(source)", "", "Invalid", error, problem_anchor(error)) for error in view.source_errors
    ]
    if not problems:
        return "<p>None.</p>"
    rows = []
    for kind_name, where, reason, message, anchor in problems:
        text = escape(message)
        if len(message) > SHORT_MESSAGE:
            text = (
                f'<details id="{anchor}-text"><summary>{escape(_cut(message, SHORT_MESSAGE))}'
                f"</summary>{text}</details>"
            )
        cells = "".join(f"<td>{escape(cell)}</td>" for cell in (kind_name, where, reason))
        rows.append(f'<tr id="{anchor}">{cells}<td>{text}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("object", "field", "reason", "message"))
    return f'<table class="bad"><tr>{head}</tr>{"".join(rows)}</table>'


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
