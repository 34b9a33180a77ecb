"""The benchmark report: runs the gateway scenarios and the fleet benchmarks, writes Markdown
with SVG plots (docs/benchmarks.md and docs/benchmarks/*.svg).

    python benchmarks/report.py            # sizes that fit a 2-core machine (about 12 minutes)
    python benchmarks/report.py --full     # the whole set (R up to 5,000, 2 minutes of churn,
                                           # 10,000 streams, 50,000 Services): an hour or more
    python benchmarks/report.py --quick    # a first look (a few minutes)
    python benchmarks/report.py --from results.json   # write the report again from saved figures
    python benchmarks/report.py --from results.json --only route_load   # run one part again

Each scenario runs in a process of its own: `gateway_bench.py` (probe, routechange, route-load;
see its docstring for what each reproduces of howardjohn/gateway-api-bench and where it
deviates; the probe and route-load with one shared route table and again with per-host tables,
on which their targets are judged), then `fanout.py`, `propagation.py --sotw-floor` and
`startup.py` as they are. The figures are kept as JSON beside the report
(`docs/benchmarks/results.json`) so the Markdown can be rewritten without running anything.
Plots need matplotlib (`pip install -e '.[bench]'`); without it the report is written without
them and says so.

The machine's load average is read before and after every scenario and printed in the report:
the figures of a loaded machine are not those of a quiet one. At the end it prints each target
met or not met, with the ratio of the figure to the target.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from gateway_bench import ANCHORS, TARGETS, latency_bins, summary, verdicts  # noqa: E402

DOCS = ROOT / "docs"
IMAGES = "benchmarks"  # below docs/

Results = dict[str, Any]


# --- running ---------------------------------------------------------------------------------


def sizes(profile: str) -> dict[str, list[str]]:
    """The command lines (after the script) of each run, for a profile."""
    runs = {
        "quick": {
            "probe": "probe --quick",
            "probe_spaced": "probe --quick --routes 300 --gap 1",
            "probe_per_host": "probe --quick --route-tables per-host",
            "routechange": "routechange --quick",
            "route_load": "route-load --quick",
            "route_load_per_host": "route-load --quick --route-tables per-host",
            "fanout": "--streams 100 --streams 300 --updates 3",
            "fanout_storm": "--storm --streams 300",
            "propagation": "--services 500 --envoys 2 --changes 5 --sotw-floor --idle-seconds 5",
            "startup": "--services 2000 --repeat 1",
        },
        "default": {
            "probe": "probe --routes 0 --routes 1000 --routes 3000",
            "probe_spaced": "probe --routes 3000 --gap 1 --samples 20",
            "probe_per_host": (
                "probe --routes 0 --routes 1000 --routes 3000 --route-tables per-host"
            ),
            "routechange": "routechange",
            "route_load": "route-load --churn-seconds 60",
            "route_load_per_host": "route-load --churn-seconds 60 --route-tables per-host",
            "fanout": "--streams 100 --streams 1000 --updates 5",
            # The fleet the target names, over delta (a minute): SotW's at 10,000 is --full's.
            "fanout_delta": "--streams 10000 --clusters 10000 --updates 5 --delta",
            "fanout_storm": "--storm --streams 1000",
            "propagation": "--services 2000 --envoys 3 --changes 10 --sotw-floor --idle-seconds 5",
            # One start is a noisy figure on a shared machine: the median of three is judged.
            "startup": "--services 10000 --repeat 3",
        },
        "full": {
            "probe": "probe --routes 0 --routes 1000 --routes 3000 --routes 5000",
            "probe_spaced": "probe --routes 3000 --gap 1",
            "probe_per_host": (
                "probe --routes 0 --routes 1000 --routes 3000 --routes 5000 --route-tables per-host"
            ),
            "routechange": "routechange",
            "route_load": "route-load --churn-seconds 120",
            "route_load_per_host": "route-load --churn-seconds 120 --route-tables per-host",
            # 10,000 Services, as the targets say. The clients share the server's two cores:
            # over TLS they cannot finish 10,000 handshakes within the server's 5 s.
            "fanout": (
                "--streams 1000 --streams 10000 --clusters 10000 --tls both --handshake-timeout 60"
            ),
            "fanout_delta": (
                "--streams 1000 --streams 10000 --clusters 10000 --tls both --delta "
                "--handshake-timeout 60"
            ),
            "fanout_storm": "--storm --streams 10000 --clusters 10000 --delta",
            "propagation": "--services 10000 --envoys 10 --sotw-floor",
            "startup": "--services 10000 --repeat 3",
            "startup_50k": "--services 50000 --repeat 1",
        },
    }[profile]
    return {name: line.split() for name, line in runs.items()}


SCRIPTS = {
    "probe": "gateway_bench.py",
    "probe_spaced": "gateway_bench.py",
    "probe_per_host": "gateway_bench.py",
    "routechange": "gateway_bench.py",
    "route_load": "gateway_bench.py",
    "route_load_per_host": "gateway_bench.py",
    "fanout": "fanout.py",
    "fanout_delta": "fanout.py",
    "fanout_storm": "fanout.py",
    "propagation": "propagation.py",
    "startup": "startup.py",
    "startup_50k": "startup.py",
}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_one(name: str, args: Sequence[str]) -> dict[str, Any]:
    """One scenario in a process of its own: its output, its JSON figures, the load around it."""
    script = HERE / SCRIPTS[name]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    record: dict[str, Any] = {"command": f"python benchmarks/{script.name} {' '.join(args)}"}
    record["load_before"] = load_average()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.json"
        extra = ["--json", str(figures)] if script.name == "gateway_bench.py" else []
        print(f"== {record['command']}", flush=True)
        done = subprocess.run(
            [sys.executable, str(script), *args, *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        print(done.stdout, flush=True)
        record["output"] = done.stdout
        record["returncode"] = done.returncode
        if figures.exists():
            record["figures"] = json.loads(figures.read_text())
    record["seconds"] = round(time.monotonic() - started, 1)
    record["load_after"] = load_average()
    return record


def machine() -> dict[str, Any]:
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        model = found.group(1).strip() if found else ""
    envoy = ""
    try:
        from dragoman.demo.envoy import find_envoy

        version = subprocess.run([find_envoy(), "--version"], capture_output=True, text=True)
        found = re.search(r"version: \S+/(\d+\.\d+\.\d+)", version.stdout)
        envoy = found.group(1) if found else version.stdout.strip()[-80:]
    except Exception as error:  # the report says what it could not find, it does not stop
        envoy = f"not found ({error})"
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "envoy": envoy,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


# --- reading the fleet benchmarks' output ----------------------------------------------------


FANOUT_HEAD = re.compile(r"S=\s*(\d+) streams \(([^,)]+)(, mTLS)?")
FANOUT_RECEIVED = re.compile(r"all streams received: median ([\d.]+) s, p99 ([\d.]+) s")
FANOUT_IDLE = re.compile(r"([\d.]+) KiB per idle stream")


def parse_fanout(output: str) -> list[dict[str, Any]]:
    """Each scenario of fanout.py's output: streams, mode, median/p99 seconds, KiB per stream."""
    found: list[dict[str, Any]] = []
    for line in output.splitlines():
        head = FANOUT_HEAD.search(line)
        if head:
            mode = head.group(2) + (" mTLS" if head.group(3) else "")
            found.append({"streams": int(head.group(1)), "mode": mode})
            continue
        if not found:
            continue
        received = FANOUT_RECEIVED.search(line)
        if received:
            found[-1]["median_s"] = float(received.group(1))
            found[-1]["p99_s"] = float(received.group(2))
        idle = FANOUT_IDLE.search(line)
        if idle and "kib_per_stream" not in found[-1]:
            found[-1]["kib_per_stream"] = float(idle.group(1))
    return found


STORM_HEAD = re.compile(r"^storm: S=\s*(\d+) streams")
STORM_SERVED = re.compile(r"every stream served in full: ([\d.]+) s")
STORM_STEADY = re.compile(
    r"well-behaved stream, \d+ updates meanwhile: median [\d.]+ s, max ([\d.]+) s"
)


def parse_storm(output: str) -> dict[str, Any]:
    """fanout.py --storm: S, seconds until every stream was served, the well-behaved
    stream's slowest update (seconds)."""
    found: dict[str, Any] = {}
    for line in output.splitlines():
        if head := STORM_HEAD.search(line):
            found["streams"] = int(head.group(1))
        elif served := STORM_SERVED.search(line):
            found["served_s"] = float(served.group(1))
        elif steady := STORM_STEADY.search(line):
            found["steady_max_s"] = float(steady.group(1))
    return found


ROUND = re.compile(r"^== round \d+: (dragoman|SotW floor)\b.*N = ([\d,]+), (\d+) Envoys")
CPU_PER_CHANGE = re.compile(r"^CPU per change, dragoman\s+median ([\d.]+) ms")


def parse_propagation(output: str) -> dict[str, Any]:
    """propagation.py --sotw-floor: N, Envoys, and each round's median CPU per change (ms) of
    dragoman and of the floor server."""
    found: dict[str, Any] = {"dragoman_ms": [], "floor_ms": []}
    server = ""
    for line in output.splitlines():
        head = ROUND.search(line)
        if head:
            server = "dragoman_ms" if head.group(1) == "dragoman" else "floor_ms"
            found["services"] = int(head.group(2).replace(",", ""))
            found["envoys"] = int(head.group(3))
            continue
        cpu = CPU_PER_CHANGE.search(line)
        if cpu and server:
            found[server].append(float(cpu.group(1)))
    return found


STARTUP_HEAD = re.compile(r"^== N = ([\d,]+), ([^,]+), (SotW|delta) ==")
STARTUP_READY = re.compile(r"^start -> all \d+ clusters served\s+wall\s+([\d.]+) s")
STARTUP_MEDIAN = re.compile(r"^median of \d+\s+wall\s+([\d.]+) s")
READY_TARGET_S = {10_000: 2.0, 50_000: 12.0}


def parse_startup(output: str) -> list[dict[str, Any]]:
    """startup.py: each layout's N and seconds from start until every cluster was served
    (the median, where the layout ran several times)."""
    found: list[dict[str, Any]] = []
    for line in output.splitlines():
        head = STARTUP_HEAD.search(line)
        if head:
            services = int(head.group(1).replace(",", ""))
            found.append({"services": services, "layout": head.group(2)})
            continue
        ready = STARTUP_READY.search(line)
        if ready and found and "seconds" not in found[-1]:
            found[-1]["seconds"] = float(ready.group(1))
        median = STARTUP_MEDIAN.search(line)
        if median and found:
            found[-1]["seconds"] = float(median.group(1))
    return found


def fleet_verdicts(results: Results) -> list[str]:
    """CPU per change (target 35 ms, beside the floor) and start-up (10,000 and 50,000)."""
    from gateway_bench import verdict

    runs = results.get("runs", {})
    lines = []
    if "propagation" in runs:
        found = parse_propagation(runs["propagation"]["output"])
        if found["dragoman_ms"]:
            ours = statistics.median(found["dragoman_ms"])
            floor = statistics.median(found["floor_ms"]) if found["floor_ms"] else float("nan")
            name = (
                f"SotW CPU per change, N={found['services']:,}, {found['envoys']} Envoys, ms "
                f"(the ideal server: {floor:g} ms)"
            )
            lines.append(verdict(name, ours, 35.0))
    if "fanout_storm" in runs:
        storm = parse_storm(runs["fanout_storm"]["output"])
        if "served_s" in storm:
            name = f"reconnect storm, S={storm['streams']:,}"
            lines.append(verdict(f"{name}: every stream served, s", storm["served_s"], 60.0))
        if "steady_max_s" in storm:
            lines.append(
                verdict(
                    f"{name}: a well-behaved stream's update, max s", storm["steady_max_s"], 1.0
                )
            )
    for name in ("startup", "startup_50k"):
        if name in runs:
            for row in parse_startup(runs[name]["output"]):
                target = READY_TARGET_S.get(row["services"])
                if target is not None and "seconds" in row:
                    label = f"ready to serve, N={row['services']:,} ({row['layout']}) s"
                    lines.append(verdict(label, row["seconds"], target))
    return lines


# --- plots -----------------------------------------------------------------------------------


def pyplot() -> Any:
    """matplotlib's pyplot drawing to files, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        matplotlib.rcParams["svg.hashsalt"] = "dragoman"  # the same figures, the same file
        matplotlib.rcParams["svg.fonttype"] = "none"
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


ANCHOR_COLOURS = {
    "agentgateway": "#2ca02c",
    "Istio": "#1f77b4",
    "Envoy Gateway": "#d62728",
    "NGINX Gateway Fabric": "#9467bd",
}


def plot_probe(results: Results, path: Path) -> bool:
    plt = pyplot()
    probes = results.get("probe", {})
    if plt is None or not (probes or results.get("probe_per_host")):
        return False
    figure, axes = plt.subplots(figsize=(7.5, 6.0))
    for name, (low, high) in ANCHORS["probe_3000_ms"].items():
        colour = ANCHOR_COLOURS.get(name, "grey")
        axes.axhspan(low * 0.93, high * 1.07, color=colour, alpha=0.15)
        axes.text(0.01, high * 1.1, f"{name} (published)", color=colour, fontsize=8,
                  transform=axes.get_yaxis_transform())  # fmt: skip
    per_host = results.get("probe_per_host") or {}
    for mode, marker in (("manifests", "o"), ("kubernetes", "s")):
        for tables, runs in (("", probes.get(mode)), (", per-host tables", per_host.get(mode))):
            if not runs:
                continue
            routes = [f["routes"] for f in runs]
            medians = [summary(f["samples_ms"])["median"] for f in runs]
            p99s = [summary(f["samples_ms"])["p99"] for f in runs]
            name = f"dragoman, {mode}{tables}"
            mark = marker if not tables else {"o": "D", "s": "P"}[marker]
            line = axes.plot(routes, medians, marker=mark, label=f"{name}: median")[0]
            axes.plot(routes, p99s, marker=mark, linestyle="--", color=line.get_color(),
                      label=f"{name}: p99")  # fmt: skip
        spaced = (results.get("probe_spaced") or {}).get(mode) or []
        if spaced:
            medians = [summary(f["samples_ms"])["median"] for f in spaced]
            label = f"dragoman, {mode}, writes 1 s apart: median"
            axes.plot([f["routes"] for f in spaced], medians, marker="^", linestyle="", label=label)
    for tables, name in (("", "route_load"), (", per-host tables", "route_load_per_host")):
        under = (results.get(name) or {}).get("probe")
        if under and under["samples_ms"]:
            label = f"dragoman, kubernetes{tables}, under churn: median"
            median = summary(under["samples_ms"])["median"]
            axes.plot([under["routes"]], [median], marker="*", markersize=12, linestyle="",
                      label=label)  # fmt: skip
    axes.axhline(TARGETS["probe_median_ms_manifests"], color="black", linewidth=0.8, linestyle=":")
    axes.text(0.99, TARGETS["probe_median_ms_manifests"] * 1.05, "target (manifests median)",
              ha="right", fontsize=8, transform=axes.get_yaxis_transform())  # fmt: skip
    axes.set_yscale("log")
    axes.set_xlabel("HTTPRoutes already served (R)")
    axes.set_ylabel("write → first 200 through Envoy (ms)")
    axes.set_title("Route propagation (probe)")
    # Below the plot, in two columns: inside, a dozen entries would hide the lines.
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    save(figure, path)
    plt.close(figure)
    return True


def plot_routechange(results: Results, path: Path) -> bool:
    plt = pyplot()
    runs = results.get("routechange") or []
    if plt is None or not runs:
        return False
    figure, all_axes = plt.subplots(len(runs), 1, figsize=(7.5, 2.6 * len(runs)), squeeze=False)
    for axes, run in zip((a[0] for a in all_axes), runs, strict=True):
        bins = run.get("bins") or latency_bins(run.get("timeline", []), 0.25)
        starts = [t for t, _, _ in bins]
        axes.plot(starts, [median for _, median, _ in bins], linewidth=0.8, label="median")
        axes.plot(starts, [most for _, _, most in bins], linewidth=0.8, label="max")
        failed = run.get("failures") or run.get("timeline", [])
        bad = [(t, max(ms, 0.1)) for t, ms, status in failed if not 200 <= status < 300]
        if bad:
            axes.scatter([t for t, _ in bad], [ms for _, ms in bad], s=25, marker="x",
                         color="red", label="non-2xx or no answer")  # fmt: skip
        for t, _label in run["change_times"]:
            axes.axvline(t, color="grey", linewidth=0.3, alpha=0.6)
        if run.get("restart_time") is not None:
            axes.axvline(
                run["restart_time"], color="red", linewidth=1.2, label="dragoman restarted"
            )
        axes.set_yscale("log")
        axes.set_ylabel("latency per 0.25 s (ms)")
        axes.set_title(
            f"Route changes under {run['achieved_rps']:.0f} req/s, {run['mode']}: "
            f"{run['changes']} changes (grey), {run['non_2xx'] + run['connection_errors']} errors",
            fontsize=9,
        )
        axes.legend(fontsize=7, loc="upper right")
    all_axes[-1][0].set_xlabel("seconds")
    save(figure, path)
    plt.close(figure)
    return True


def rounded(value: Any) -> Any:
    """Floats to 3 decimals, through lists and dicts: the saved figures stay small."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def save(figure: Any, path: Path) -> None:
    """Written in the format the file's suffix names (SVG for the report)."""
    figure.tight_layout()
    figure.savefig(path, format=path.suffix.lstrip("."))


def plot_churn(results: Results, path: Path) -> bool:
    plt = pyplot()
    per_host = results.get("route_load_per_host")
    load = per_host or results.get("route_load")  # the judged run
    if plt is None or not load or not load["cpu_series"]:
        return False
    figure, (cpu_axes, rss_axes) = plt.subplots(2, 1, figsize=(7.5, 4.8), sharex=True)
    cpu_axes.plot([t for t, _ in load["cpu_series"]], [c for _, c in load["cpu_series"]],
                  label="dragoman")  # fmt: skip
    envoy = load.get("envoy_cpu_series") or []
    if envoy:
        cpu_axes.plot([t for t, _ in envoy], [c for _, c in envoy], label="Envoy's main thread")
    cpu_axes.set_ylim(bottom=0)
    cpu_axes.legend(fontsize=8)
    cpu_axes.axhline(TARGETS["churn_cpu_percent"], color="black", linestyle=":", linewidth=0.8)
    cpu_axes.set_ylabel("CPU (% of a core)")
    routes = load["namespaces"] * load["per_namespace"]
    tables = "per-host route tables" if per_host else "one route table"
    cpu_axes.set_title(
        f"{routes:,} HTTPRoutes ({tables}), {load['churn_rate']:.0f} EndpointSlice changes/s",
        fontsize=9,
    )
    rss_axes.plot([t for t, _ in load["rss_series"]], [r for _, r in load["rss_series"]])
    rss_axes.axhline(TARGETS["churn_rss_mib"], color="black", linestyle=":", linewidth=0.8)
    rss_axes.set_ylabel("dragoman RSS (MiB)")
    rss_axes.set_ylim(bottom=0)
    rss_axes.set_xlabel("seconds of churn (dotted: the targets)")
    save(figure, path)
    plt.close(figure)
    return True


def plot_fanout(fanout: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    rows = [row for row in fanout if "median_s" in row]
    if plt is None or not rows:
        return False
    figure, axes = plt.subplots(figsize=(7.5, 4))
    for mode in sorted({row["mode"] for row in rows}):
        mine = sorted((row for row in rows if row["mode"] == mode), key=lambda r: r["streams"])
        streams = [row["streams"] for row in mine]
        axes.plot(streams, [row["median_s"] for row in mine], marker="o", label=f"{mode}: median")
        axes.plot(streams, [row["p99_s"] for row in mine], marker="o", linestyle="--",
                  label=f"{mode}: p99")  # fmt: skip
    axes.axhline(2.0, color="black", linestyle=":", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_xlabel("ADS streams")
    axes.set_ylabel("one change → every stream (s)")
    axes.set_title("Fan-out (dotted: the 2 s p99 target)")
    axes.legend(fontsize=8)
    save(figure, path)
    plt.close(figure)
    return True


# --- the Markdown ----------------------------------------------------------------------------


def fmt(value: float, digits: int = 1) -> str:
    return "-" if value != value else f"{value:,.{digits}f}"  # NaN: no samples


def probe_table(results: Results) -> list[str]:
    lines = [
        "| mode | R | samples | median ms | p90 ms | p99 ms | max ms | non-200 on existing "
        "routes | new route non-404/200 | connection errors | not served in 60 s | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    rows = [(mode, f) for mode, runs in results.get("probe", {}).items() for f in runs]
    rows += [
        (f"{mode}, per-host tables", f)
        for mode, runs in (results.get("probe_per_host") or {}).items()
        for f in runs
    ]
    rows += [
        (f"{mode}, spaced {f['gap_s']:g} s", f)
        for mode, runs in results.get("probe_spaced", {}).items()
        for f in runs
    ]
    for tables, name in (("", "route_load"), (", per-host tables", "route_load_per_host")):
        under = (results.get(name) or {}).get("probe")
        if under:
            rows.append((f"kubernetes{tables}, under churn", under))
    for mode, f in rows:
        s = summary(f["samples_ms"])
        lines.append(
            f"| {mode} | {f['routes']:,} | {s['n']} | {fmt(s['median'])} | {fmt(s['p90'])} | "
            f"{fmt(s['p99'])} | {fmt(s['max'])} | {f['existing_non_200']} of "
            f"{f['existing_requests']:,} | {f['new_route_errors']} | {f['connection_errors']} | "
            f"{f.get('timeouts', 0)} | {' '.join(map(str, f['load']))} |"
        )
    return lines


def anchors_table(results: Results) -> list[str]:
    """dragoman at R = 3,000 (or the largest R run) beside the published figures."""
    lines = [
        "Published figures read from gateway-api-bench's README-v2 (text and plots); dragoman's "
        "ratio is to the middle of each published range.",
        "",
        "| implementation | new route → 200 at up to 3,000 routes | under load |",
        "|---|---|---|",
    ]
    under = ANCHORS["probe_under_load_ms"]
    for name, (low, high) in ANCHORS["probe_3000_ms"].items():
        span = f"{low} ms" if low == high else f"{low}-{high} ms"
        loaded = f"{under[name]} ms" if name in under else "failed (over 5 min)"
        lines.append(f"| {name} (published) | {span} | {loaded} |")
    mine = {mode: runs[-1] for mode, runs in results.get("probe", {}).items() if runs}
    mine |= {
        f"{mode}, per-host tables": runs[-1]
        for mode, runs in (results.get("probe_per_host") or {}).items()
        if runs
    }
    loaded_text = {}
    for mode, name in (
        ("kubernetes", "route_load"),
        ("kubernetes, per-host tables", "route_load_per_host"),
    ):
        loaded_probe = (results.get(name) or {}).get("probe")
        if loaded_probe and loaded_probe["samples_ms"]:
            median = summary(loaded_probe["samples_ms"])["median"]
            ratios = ", ".join(f"{median / ms:.2f}x {anchor}" for anchor, ms in under.items())
            loaded_text[mode] = (
                f"median {fmt(median)} ms at R = {loaded_probe['routes']:,} during the churn "
                f"({ratios})"
            )
    for mode, f in mine.items():
        s = summary(f["samples_ms"])
        ratios = ", ".join(
            f"{s['median'] / ((low + high) / 2):.2f}x {name}"
            for name, (low, high) in ANCHORS["probe_3000_ms"].items()
        )
        lines.append(
            f"| dragoman, {mode} (R = {f['routes']:,}) | median {fmt(s['median'])} ms, p99 "
            f"{fmt(s['p99'])} ms ({ratios}) | {loaded_text.get(mode, '-')} |"
        )
    return lines


def routechange_table(results: Results) -> list[str]:
    lines = [
        "| mode | changes | requests | req/s | non-2xx | connection errors | around the restart "
        "| errors after | re-applied by Envoy across the restart | load |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for f in results.get("routechange", []):
        reapplied = ", ".join(f"{k.split('.')[-1]} {v}" for k, v in f["reapplied"].items())
        lines.append(
            f"| {f['mode']} | {f['changes']} | {f['requests']:,} | {f['achieved_rps']:.0f} | "
            f"{f['non_2xx']} | {f['connection_errors']} | {f['restart_errors']} | "
            f"{f['by_change'] or 'none'} | {reapplied} | {' '.join(map(str, f['load']))} |"
        )
    published = ", ".join(f"{k}: {v}" for k, v in ANCHORS["routechange"].items())
    lines += ["", f"Published (pass = zero errors): {published}."]
    return lines


def route_load_lines(results: Results) -> list[str]:
    """Each run of route-load: with per-host route tables (judged) and with one route table
    (the original's setup, shown), or whichever was run."""
    per_host, shared = results.get("route_load_per_host"), results.get("route_load")
    if not per_host and not shared:
        return ["Not run."]
    if not per_host or not shared:
        return route_load_run(per_host or shared)
    return [
        "The targets are judged on the per-host route tables (as the probe's): each new route "
        "probed during the churn is then one scope, which Envoy applies without the endpoint "
        "updates behind it waiting. With one route table (the original's setup) each new route "
        "rewrites the whole table; its figures are shown below.",
        "",
        "### Per-host route tables (judged)",
        "",
        *route_load_run(per_host),
        "",
        "### One route table (shown)",
        "",
        *route_load_run(shared),
    ]


def route_load_run(f: dict[str, Any]) -> list[str]:
    s = summary(f["endpoint_ms"])
    routes = f["namespaces"] * f["per_namespace"]
    relative = ", ".join(f"{k} {v}x" for k, v in ANCHORS["route_scale_cpu_relative"].items())
    return [
        f"{routes:,} HTTPRoutes in {f['namespaces']} namespaces to {routes:,} pod-backed "
        f"Services (Kubernetes mode), ready (last route answering through Envoy) "
        f"{f['ready_s']:.1f} s after dragoman started; then {f['changes']:,} EndpointSlice "
        f"changes at {f['churn_rate']:.0f}/s over {f['churn_seconds']:.0f} s (load "
        f"{' '.join(map(str, f['load']))}).",
        "",
        "| figure | dragoman | target |",
        "|---|---:|---:|",
        f"| control-plane CPU, mean over the churn | {f['churn_cpu_percent']:.1f}% of a core | "
        f"≤ {TARGETS['churn_cpu_percent']:g}% |",
        f"| control-plane RSS, highest | {f['churn_rss_mib']:.0f} MiB | "
        f"≤ {TARGETS['churn_rss_mib']:g} MiB |",
        f"| endpoint change → Envoy forwards to the new endpoint | median {fmt(s['median'])} ms, "
        f"p99 {fmt(s['p99'])} ms, max {fmt(s['max'])} ms ({s['n']:,} changes seen, "
        f"{f['endpoint_timeouts']} not within 10 s) | p99 ≤ {TARGETS['endpoint_p99_ms']:g} ms |",
        f"| Envoy main-thread CPU per change (over its idle {f['envoy_idle_ms_per_s']:.2f} ms/s) "
        f"| {f['envoy_ms_per_change']:.2f} ms | reported |",
        *bench_stall_row(f),
        "",
        "Published control-plane CPU at steady churn, relative to the best (gateway-api-bench "
        f"README.md; absolute figures are only in its graphs): {relative}. README-v2: at steady "
        "state Istio used 4x, NGINX 9x and Envoy Gateway 82x the control-plane CPU of "
        "agentgateway; agentgateway's data plane stayed below 1% CPU, the others 20-240%.",
        "",
        *under_churn_lines(f.get("probe")),
    ]


def bench_stall_row(f: dict[str, Any]) -> list[str]:
    """How often the benchmark's own loop stalled (figures saved before it was measured have
    no row): such a stall delays the writes and their observation alike, and counts against
    dragoman. Its test API server runs in a process of its own, whose threads stalled it."""
    stalls = f.get("bench_stalls_ms")
    if stalls is None:
        return []
    most = max(stalls, default=0.0)
    return [
        f"| the benchmark's own event loop woke more than 30 ms late | {len(stalls)} times, "
        f"at most {most:.0f} ms | reported |"
    ]


def under_churn_lines(probe: dict[str, Any] | None) -> list[str]:
    """What the probe during the churn found (its figures are in the probe table)."""
    if not probe:
        return []
    s = summary(probe["samples_ms"])
    found = (
        f"During the churn, {s['n']} new routes were probed (R = {probe['routes']:,}): median "
        f'{fmt(s["median"])} ms, p99 {fmt(s["p99"])} ms (the probe table\'s "under churn" row).'
    )
    if probe.get("timeouts"):
        found += (
            " A new route was not served within 60 s while the churn went on; probing stopped "
            "there."
        )
    return [found]


def existing_section(results: Results, name: str, title: str, note: str) -> list[str]:
    record = results.get("runs", {}).get(name)
    if not record:
        return []
    before, after = (" ".join(map(str, record[k])) for k in ("load_before", "load_after"))
    load = f"load {before} → {after}"
    return [
        f"### {title}",
        "",
        note,
        "",
        f"`{record['command']}` ({record['seconds']:.0f} s, {load}, exit {record['returncode']}):",
        "",
        "```",
        record["output"].strip(),
        "```",
        "",
    ]


FLEET = [
    ("fanout", "Fan-out to a fleet (`fanout.py`)",
     "Targets: one change reaches every one of 10,000 streams with p99 ≤ 2 s; ≤ 60 KiB per idle "
     "stream in plaintext, ≤ 150 KiB over TLS."),
    ("fanout_delta", "Fan-out over delta ADS (`fanout.py --delta`)", ""),
    ("fanout_storm", "Reconnect storm (`fanout.py --storm`)",
     "Targets: 10,000 streams connecting at once (as after a replica died) are all served "
     "within 60 s, with RSS bounded, while a well-behaved stream's updates reach it in under "
     "1 s."),
    ("propagation", "SotW CPU per change (`propagation.py --sotw-floor`)",
     "Target: dragoman's own CPU per change ≤ 35 ms at 10,000 Services with 10 Envoys; the "
     "ideal SotW server of `--sotw-floor` is the floor measured in the same run."),
    ("startup", "Size: ready to serve (`startup.py`)",
     "Targets: 10,000 Services ready in ≤ 2 s; 50,000 ExternalName Services with 50,000 "
     "HTTPRoutes in ≤ 12 s with RSS ≤ 600 MiB (`--full`)."),
    ("startup_50k", "Size: 50,000 Services (`startup.py --services 50000`)", ""),
]  # fmt: skip


DEVIATIONS = """\
What is reproduced of [howardjohn/gateway-api-bench](https://github.com/howardjohn/gateway-api-bench)
(`tests/probe/probe.go`, `tests/routechange/routechange.go`, `tests/route-load.sh`), and
where this differs:

- **No Kubernetes cluster.** The original runs in a single-node kind cluster with each
  implementation's own deployment. Here dragoman runs as a process, one Envoy
  (`--concurrency 1`) as the Gateway's data plane and echo backends on 127.0.0.2/127.0.0.3.
  Objects are written as files into the watched directory (manifest mode), or through the test
  suite's API server that speaks list/watch (Kubernetes mode): there is no kube-apiserver,
  etcd or controller-manager in the path, and dragoman runs without leader election (writes
  no status; the original never waits for status either).
- **probe.** The route is the original's (two rules with request- and response-header
  filters, `/N` to the backend and `/` to a Service that does not exist; hostname
  `N-route.example.com`), each created right after the previous one answered 200, as the
  original does. The original probes every 5 ms from route 0 to 3,000; here every 1 ms, and R
  is reached in steps (all routes up to the next R written at once, then 50 timed routes at
  each R). The original counts answers other than 404/200 on the new route; this also asks
  already-served routes every 5 ms meanwhile and counts every non-200. "Under load" is the
  original's probe v2 (during the route-scale test): here 50 routes are probed while the
  route-load churn runs.
- **routechange.** The original sends requests back to back and applies 20 versions of the
  route 200 ms apart (backendRef port 80 ↔ 8080, i.e. another target port, and a
  backendRef-level response-header filter), stopping at the first non-200. Here requests are
  paced at 200/s, 100 changes are made 200 ms apart cycling through more kinds of change
  (backend swap, the original's port swap with its filter, weights, a path match added and
  removed, a rule filter added and removed, the Service's port renamed), every error is
  counted and the run goes on, and dragoman is restarted halfway.
- **route-load.** The original runs pilot-load (50 namespaces x 100 applications, one pod
  each, an HTTPRoute each, pods jittered every 2 s and configurations every 1 s) and reads
  CPU and memory from cAdvisor. Here: the same objects in the test API server, then a steady
  20 EndpointSlice changes per second, each moving one Service's single endpoint to the other
  backend (a pod replaced), timed until Envoy forwards a request for it to the new endpoint;
  dragoman's CPU and RSS read from /proc once a second. The test API server runs in the
  benchmark's process, so none of its CPU is counted as dragoman's; route edits are not part
  of the churn.
- **Anchors.** The published figures come from a 16-core machine, in a cluster, with every
  implementation running side by side; ours from the machine below. Ratios to them are
  indicative only. Published route-scale CPU figures are ratios between implementations, not
  absolute values, so our absolute figures are compared with the targets instead.
"""


def _load(results: Results, key: str) -> str:
    return " ".join(map(str, results.get(key, [])))


def markdown(results: Results, images: dict[str, bool]) -> str:
    m = results.get("machine", {})
    lines = [
        "# Benchmarks",
        "",
        "Written by `benchmarks/report.py`; how to reproduce it is at the end. The scenarios of "
        "the public Gateway API benchmark (probe, routechange, route-load) run with a real "
        "Envoy; the fleet figures come from the benchmarks beside them.",
        "",
        "## Machine",
        "",
        f"- {m.get('cpus')} CPUs ({m.get('cpu') or 'unknown model'}), {m.get('system')}, "
        f"Python {m.get('python')}, Envoy {m.get('envoy')}",
        f"- run {m.get('date')}, profile `{results.get('profile')}`, "
        f"{results.get('seconds', 0):.0f} s",
        f"- load average (1, 5, 15 min) before: {_load(results, 'load_before')}; after: "
        f"{_load(results, 'load_after')} (each scenario's own is "
        "given beside its figures)",
        *[
            f"- `{name}` run again {date} (`--from ... --only {name}`), the rest as saved"
            for name, date in sorted(results.get("run_again", {}).items())
        ],
        "",
        "## Targets",
        "",
        *[f"- {line}" for line in results.get("verdicts", [])],
        "",
        "## Route propagation (probe)",
        "",
        "A new HTTPRoute (new hostname and path) is written; the time until Envoy first answers "
        "200 for it, polling every millisecond.",
        "",
    ]
    if any((results.get("probe_per_host") or {}).values()):
        lines += [
            "With one route table (`shared`, the original's setup: SotW ADS) every change sends "
            "the whole table. With per-host tables (the Gateway annotated "
            "`dragoman.dev/route-tables: per-host`, Envoy on delta ADS) each hostname is a scope "
            "of its own and a change sends only its scope. The probe targets at R = 3,000 "
            "(median ≤ 15 ms and p99 ≤ 40 ms in manifest mode, median ≤ 25 ms in Kubernetes "
            "mode) are judged on the per-host figures; the shared ones are shown beside them.",
            "",
        ]
    if images.get("probe"):
        lines += [f"![Route propagation]({IMAGES}/probe.svg)", ""]
    lines += [*probe_table(results), "", *anchors_table(results), ""]
    lines += ["## Route changes under traffic (routechange)", ""]
    if images.get("routechange"):
        lines += [f"![Route changes]({IMAGES}/routechange.svg)", ""]
    lines += [*routechange_table(results), ""]
    lines += ["## Route scale with endpoint churn (route-load)", ""]
    if images.get("churn"):
        lines += [f"![CPU and RSS during churn]({IMAGES}/churn.svg)", ""]
    lines += [*route_load_lines(results), ""]
    lines += ["## The fleet and size benchmarks", ""]
    if images.get("fanout"):
        lines += [f"![Fan-out]({IMAGES}/fanout.svg)", ""]
    for name, title, note in FLEET:
        lines += existing_section(results, name, title, note)
    if not any(images.values()):
        lines += ["(No plots: matplotlib is not installed; `pip install -e '.[bench]'`.)", ""]
    lines += ["## How this differs from gateway-api-bench", "", DEVIATIONS, "## Reproduce", ""]
    lines += [
        "```sh",
        "pip install -e '.[bench]'                  # matplotlib, for the plots",
        "python benchmarks/report.py                # this report's sizes (~12 min, 2 cores)",
        "python benchmarks/report.py --full         # every size the targets name",
        "python benchmarks/gateway_bench.py probe --mode manifests --routes 3000   # one scenario",
        "python benchmarks/gateway_bench.py probe --routes 3000 --route-tables per-host",
        "```",
        "",
        "Commands run for this report:",
        "",
        *[f"- `{r['command']}`" for r in results.get("runs", {}).values()],
        "",
    ]
    return "\n".join(lines)


def gateway_figures(results: Results) -> Results:
    """The gateway scenarios' figures, merged from their runs."""
    merged: Results = {}
    names = ("probe", "probe_spaced", "probe_per_host", "routechange", "route_load")
    for name in (*names, "route_load_per_host"):
        figures = results.get("runs", {}).get(name, {}).get("figures") or {}
        for key in ("probe", "routechange", "route_load"):
            if key in figures:
                merged[name if key in ("probe", "route_load") else key] = figures[key]
    return merged


def write_report(results: Results, out: Path) -> str:
    """Plots and Markdown from `results` (as `collect` makes them); returns the Markdown."""
    results.update(gateway_figures(results))
    fanout = []
    for name in ("fanout", "fanout_delta"):
        record = results.get("runs", {}).get(name)
        if record:
            fanout += parse_fanout(record["output"])
    spaced = verdicts({"probe": results.get("probe_spaced", {})})
    results["verdicts"] = (
        probe_verdicts(results)
        + verdicts({"routechange": results.get("routechange", [])})
        + route_load_verdicts(results)
        + [f"spaced: {line}" for line in spaced]
        + fanout_verdicts(fanout)
        + fleet_verdicts(results)
    )
    images_dir = out.parent / IMAGES
    images_dir.mkdir(parents=True, exist_ok=True)
    images = {
        "probe": plot_probe(results, images_dir / "probe.svg"),
        "routechange": plot_routechange(results, images_dir / "routechange.svg"),
        "churn": plot_churn(results, images_dir / "churn.svg"),
        "fanout": plot_fanout(fanout, images_dir / "fanout.svg"),
    }
    text = markdown(results, images)
    out.write_text(text)
    return text


def probe_verdicts(results: Results) -> list[str]:
    """The probe's targets. A mode probed with per-host route tables too is judged on those
    (the tables a Gateway with thousands of hostnames is meant to use); its shared table's
    latencies are shown beside them with their ratios, not judged. Errors are judged in both."""
    per_host = results.get("probe_per_host") or {}
    if not any(per_host.values()):
        return verdicts({"probe": results.get("probe", {})})
    judged = verdicts({"probe": per_host})
    shown = {mode for mode, runs in per_host.items() if runs}
    shared = verdicts({"probe": results.get("probe", {})}, shown_modes=shown)
    return [f"per-host route tables (judged): {line}" for line in judged] + [
        f"shared route table: {line}" for line in shared
    ]


def route_load_verdicts(results: Results) -> list[str]:
    """route-load's targets, judged like the probe's: on the per-host route tables when they
    were run (the shared table's CPU, RSS and latencies shown beside them, not judged;
    endpoint changes never seen are judged in both)."""
    per_host, shared = results.get("route_load_per_host"), results.get("route_load")
    if not per_host:
        return verdicts({"route_load": shared}) if shared else []
    judged = [
        f"per-host route tables (judged): {line}" for line in verdicts({"route_load": per_host})
    ]
    if not shared:
        return judged
    shown = verdicts({"route_load": shared}, route_load_shown=True)
    return judged + [f"shared route table: {line}" for line in shown]


def fanout_verdicts(fanout: list[dict[str, Any]]) -> list[str]:
    from gateway_bench import verdict

    lines = []
    for row in fanout:
        if "p99_s" not in row:
            continue
        name = f"fan-out {row['mode']} S={row['streams']:,}"
        lines.append(verdict(f"{name} p99 s", row["p99_s"], 2.0))
        if "kib_per_stream" in row and row["streams"] >= 1000:  # below, one-off costs weigh
            limit = 150.0 if "mTLS" in row["mode"] else 60.0
            lines.append(verdict(f"{name} KiB per idle stream", row["kib_per_stream"], limit))
    return lines


def collect(profile: str, only: Sequence[str]) -> Results:
    results: Results = {"profile": profile, "machine": machine(), "load_before": load_average()}
    started = time.monotonic()
    results["runs"] = {
        name: run_one(name, args)
        for name, args in sizes(profile).items()
        if not only or name in only
    }
    results["seconds"] = time.monotonic() - started
    results["load_after"] = load_average()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="every size the targets name")
    size.add_argument("--quick", action="store_true", help="small sizes, a first look")
    parser.add_argument("--only", action="append", default=[], choices=sorted(SCRIPTS))
    parser.add_argument("--out", type=Path, default=DOCS / "benchmarks.md")
    parser.add_argument("--from", dest="source", type=Path, help="saved results.json")
    args = parser.parse_args(argv)
    profile = "full" if args.full else "quick" if args.quick else "default"
    print(f"load average before: {' '.join(map(str, load_average()))}", flush=True)
    if args.source:
        results = json.loads(args.source.read_text())
        for name in args.only:  # run these again, keep the rest as saved
            results["runs"][name] = run_one(name, sizes(results["profile"])[name])
            results.setdefault("run_again", {})[name] = time.strftime(
                "%Y-%m-%d %H:%M UTC", time.gmtime()
            )
    else:
        results = collect(profile, args.only)
    shown = copy.deepcopy(results)  # the report adds merged figures and verdicts to it
    write_report(shown, args.out)
    saved = args.out.parent / IMAGES / "results.json"
    if not args.source or args.only:
        saved.write_text(json.dumps(rounded(results), separators=(",", ":")) + "\n")
    print(f"\nwrote {args.out} (figures in {saved})")
    print(f"load average: {' '.join(map(str, results.get('load_before', [])))} before, "
          f"{' '.join(map(str, results.get('load_after', [])))} after")  # fmt: skip
    print("targets:")
    for line in shown["verdicts"]:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
