"""Offline-render benchmark: wall time and peak RSS per shipped stack and node count.

    python bench/render_bench.py [--repeat 3] [--nodes 2,16,128,512] [--stacks a,b] [--out FILE]

Every measurement runs in a fresh `python -c` subprocess, so each one pays the SDK's imports as
`python -m gpu_cluster.offline` does. Per stack and node count it measures the offline render
(`gpu_cluster.offline.render.render()`, same stack config except `nodes`) and, as the baseline,
a bare interpreter that only imports the SDK modules the program imports (found by reading the
program's import statements, see `sdk_modules`). Each render child imports those modules
first, timed apart, so the render is also compared with an SDK import of the same process,
which the machine's drifting speed cannot skew. Prints a markdown table, writes JSON
(default `bench/results/latest.json`). The targets are reported, never asserted: the exit code
is 0 whenever every subprocess ran.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
# Bytecode of every child (project and SDK) goes here, so runs are warm whatever
# PYTHONDONTWRITEBYTECODE says and nothing is written outside bench/ (git-ignored).
PYCACHE_DIR = RESULTS_DIR / "pycache"

# Every shipped stack (Pulumi.<stack>.yaml beside the program): issue #45 judges each.
STACKS = tuple(
    sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in PROJECT_DIR.glob("Pulumi.*.yaml"))
)
NODE_COUNTS = (2, 16, 128, 512)
SDK_PACKAGES = ("pulumi", "pulumi_kubernetes", "pulumi_gcp")
# Module of each platform's component; the other platform's is never loaded (components/select.py).
PLATFORM_MODULES = {
    "openshift": "gpu_cluster.components.openshift",
    "gke": "gpu_cluster.components.gke",
}
# SDK packages a platform's render never loads: pulumi-gcp is imported only for GKE
# (gpu_cluster/components/gcp_sdk.py), though the program's GCP components are reachable by
# import statements from anywhere (the storage component imports them when a stack has them).
UNUSED_SDK_PACKAGES = {"openshift": ("pulumi_gcp",), "gke": ()}
# Reported, never asserted.
TARGET_RENDER_OVER_BASELINE = 1.5
TARGET_SCALING = 1.2  # render(512) / render(2)
TARGET_PEAK_MIB = 400.0
# Issue #45: the program's own share (its imports and render(), the SDK's imports taken out) at
# most its SDK imports on every shipped stack (as shipped: the smallest node count), and each
# resource that nodes add at most 1.5 ms.
TARGET_PROGRAM_OVER_SDK_IMPORT = 1.0
TARGET_MS_PER_ADDED_RESOURCE = 1.5

# Both children start the same way: import each SDK module the program imports, then touch it.
# The SDKs register subpackages lazily (pulumi._utils.lazy_import); the program's
# `from X import Name` (or `k8s.apps.v1.X`) is what executes them, so this forces that too by
# asking for a name that is not there (dunders like __name__ are answered without loading).
_IMPORT_SDK = """
import importlib, json, resource, sys, time
c0, t0 = time.process_time(), time.perf_counter()
for name in json.loads(sys.argv[1]):
    hasattr(importlib.import_module(name), "_bench_force_load_")
t_sdk, c_sdk = time.perf_counter(), time.process_time()
"""

_LOADED_SDK_MODULES = f"""sorted(
    n for n, m in sys.modules.items()
    if n.split(".")[0] in {SDK_PACKAGES!r}
    and type(m).__name__ != "_LazyModule"
)"""

# The baseline: a bare interpreter importing the program's SDK modules, nothing else.
BASELINE_CHILD = (
    _IMPORT_SDK
    + f"""
c1 = time.process_time()
print(json.dumps({{
    "seconds": t_sdk - t0,
    "cpu_seconds": c1 - c0,
    "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "sdk_modules_loaded": {_LOADED_SDK_MODULES},
}}))
"""
)

# One render: the same SDK imports first (timed apart, so the ratio to them is taken within
# one process, a second apart, where the machine's speed cannot drift between the two), then
# `import gpu_cluster.offline.render` and render(). The SDK imports the program makes are then
# no-ops; `seconds` covers the whole (what `python -m gpu_cluster.offline` pays; interpreter
# start and exit are not included).
RENDER_CHILD = (
    _IMPORT_SDK
    + f"""
from gpu_cluster.offline.render import render
t1 = time.perf_counter()
files = render(sys.argv[2], tuple(json.loads(sys.argv[3])))
t2, c2 = time.perf_counter(), time.process_time()
rows = json.loads(files["resources.json"])
print(json.dumps({{
    "seconds": t2 - t0,
    "cpu_seconds": c2 - c0,
    "program_cpu_seconds": c2 - c_sdk,
    "sdk_seconds": t_sdk - t0,
    "sdk_cpu_seconds": c_sdk - c0,
    "import_seconds": t1 - t_sdk,
    "run_seconds": t2 - t1,
    "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "resources": len(rows),
    "custom_resources": sum(1 for r in rows if not r["type"].startswith("gpu-cluster:")),
    "kubernetes_objects": sum(
        1 for line in files["kubernetes.yaml"].splitlines() if line.startswith("kind: ")
    ),
    "output_bytes": sum(len(v) for v in files.values()),
    "sdk_modules_loaded": {_LOADED_SDK_MODULES},
}}))
"""
)


# --- which SDK modules the program imports ---------------------------------------------------


def _module_file(name: str) -> Path | None:
    """Source file of a module, found on disk without importing (and so running) anything."""
    top, *rest = name.split(".")
    if top == "gpu_cluster" or top == "__main__":
        base = PROJECT_DIR
        candidates = [PROJECT_DIR / "__main__.py"] if top == "__main__" else []
        rest = [top, *rest]
    else:
        spec = importlib.util.find_spec(top)
        if spec is None or spec.origin is None:
            return None
        base = Path(spec.origin).parent
        candidates = [] if rest else [Path(spec.origin)]
    if rest:
        path = base.joinpath(*rest)
        candidates += [path / "__init__.py", path.with_suffix(".py")]
    return next((c for c in candidates if c.exists()), None)


def _is_sdk(name: str) -> bool:
    return name.split(".")[0] in SDK_PACKAGES


def _longest_module(dotted: str) -> str | None:
    """`pulumi_kubernetes.apps.v1.StatefulSet` -> `pulumi_kubernetes.apps.v1`."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if _module_file(name) is not None:
            return name
    return None


def _package_of(name: str) -> str:
    path = _module_file(name)
    if path is None or path.name == "__init__.py":
        return name
    return name.rpartition(".")[0]


def _attribute_chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    attrs: list[str] = []
    cur: ast.expr = node
    while isinstance(cur, ast.Attribute):
        attrs.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    return cur.id, attrs[::-1]


def sdk_modules(platform_name: str) -> tuple[list[str], list[str]]:
    """(SDK modules, program files read) for a stack of `platform_name`.

    Follows the program's own imports from `gpu_cluster.offline.render` and `__main__.py`
    (module-level and function-level, minus the other platform's component) and collects every
    SDK module an import statement names, plus the subpackages reached by attribute
    (`k8s.apps.v1.X`)."""
    skip = {m for p, m in PLATFORM_MODULES.items() if p != platform_name}
    todo = ["gpu_cluster.offline.render", "__main__"]
    seen: set[str] = set()
    files: list[str] = []
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in skip:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is None:
            continue
        files.append(str(path.relative_to(PROJECT_DIR)))
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _is_sdk(a.name):
                        found.add(a.name)
                        bound = a.asname or a.name.split(".")[0]
                        aliases[bound] = a.name if a.asname else bound
                    elif a.name.split(".")[0] == "gpu_cluster":
                        todo.append(a.name)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if _is_sdk(node.module):
                    found.add(node.module)
                    for a in node.names:
                        sub = f"{node.module}.{a.name}"
                        if _module_file(sub) is not None:
                            found.add(sub)
                            aliases[a.asname or a.name] = sub
                elif node.module.split(".")[0] == "gpu_cluster":
                    todo.append(node.module)
                    todo.extend(f"{node.module}.{a.name}" for a in node.names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain = _attribute_chain(node)
                if chain and chain[0] in aliases:
                    module = _longest_module(".".join([aliases[chain[0]], *chain[1]]))
                    if module is not None:
                        found.add(module)
    # The generated SDK packages (pulumi_kubernetes, pulumi_gcp) import every module of a
    # package in its __init__, so `k8s.core.v1.Namespace` costs `pulumi_kubernetes.core.v1`.
    found = {_package_of(m) if m.split(".")[0] != "pulumi" else m for m in found}
    found = {m for m in found if m.split(".")[0] not in UNUSED_SDK_PACKAGES[platform_name]}
    # Parents are imported with their children anyway; keep the list to what adds something.
    leaves = sorted(m for m in found if not any(o.startswith(m + ".") for o in found))
    return leaves, sorted(files)


# --- running children ------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE_DIR)
    env["PYTHONPATH"] = str(PROJECT_DIR)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat; None where there is none."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def machine_busy(window: float = 0.3) -> float | None:
    """Fraction of all CPUs busy over `window` seconds (other processes; we are sleeping)."""
    before = _cpu_ticks()
    time.sleep(window)
    after = _cpu_ticks()
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


# Wait for the machine to be this quiet before each run (see --wait-idle).
IDLE_BUSY = 0.2
WAIT_IDLE_SECONDS = 30.0


def wait_for_idle(limit: float) -> float | None:
    """Sleep until other load drops below IDLE_BUSY or `limit` seconds pass; the busy
    fraction seen last (recorded with the run)."""
    deadline = time.monotonic() + limit
    busy = machine_busy()
    while busy is not None and busy > IDLE_BUSY and time.monotonic() < deadline:
        busy = machine_busy(1.0)
    return busy


def run_child(code: str, *args: str, wait_idle: float = 0.0) -> dict[str, Any]:
    """Run `python -c code args` in the project directory; its last stdout line is JSON.

    Adds `process_seconds`: the child's whole life seen from here (interpreter start, the
    measured part, and interpreter shutdown, which frees every loaded SDK module), and
    `busy_before`: how busy the machine's CPUs were just before (other processes)."""
    busy = wait_for_idle(wait_idle) if wait_idle > 0 else None
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=PROJECT_DIR,
        env=_child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"child failed (exit {proc.returncode}) for {args[:1]}:\n{proc.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_seconds"] = elapsed
    result["busy_before"] = busy
    return result


def stack_file(stack: str) -> dict[str, Any]:
    data = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text()) or {}
    config: dict[str, Any] = data.get("config") or {}
    return config


def stack_platform(stack: str) -> str:
    return str(stack_file(stack)["gpu-cluster:platform"])


def overrides_for(stack: str, nodes: int) -> list[str]:
    """`--set`s for `nodes`; the only other change is the node list an OpenShift stack that
    pins its nodes needs (at least `nodes` names): extended with generated names, never
    shortened or dropped, so the pinning (and its per-node cost) stays in the render."""
    sets = [f"nodes={nodes}"]
    openshift = stack_file(stack).get("gpu-cluster:openshift") or {}
    listed = len(openshift.get("nodeNames") or [])
    if listed:
        sets += [f"openshift.nodeNames[{k}]=bench-node-{k}" for k in range(listed, nodes)]
    return sets


# --- the benchmark ---------------------------------------------------------------------------


@dataclass
class Case:
    stack: str
    nodes: int
    overrides: list[str]
    runs: list[dict[str, Any]]
    # The baseline run taken just before each render run (same round, same platform).
    paired: list[dict[str, Any]]


def _spread(values: list[float]) -> float:
    """(max - min) / median: how much the machine moved under the repeats."""
    return (max(values) - min(values)) / statistics.median(values)


def _median_ratio(values: list[float], references: list[float]) -> float:
    """Median of values[i] / references[i]: runs paired by round."""
    return statistics.median(v / r for v, r in zip(values, references, strict=True))


def _mib(kib: float) -> float:
    return kib / 1024.0


def _git(*args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def measure(
    stacks: list[str], node_counts: list[int], repeat: int, wait_idle: float = WAIT_IDLE_SECONDS
) -> dict[str, Any]:
    platforms = {s: stack_platform(s) for s in stacks}
    modules = {p: sdk_modules(p) for p in sorted(set(platforms.values()))}
    cases = [Case(s, n, overrides_for(s, n), [], []) for s in stacks for n in node_counts]
    baselines: dict[str, list[dict[str, Any]]] = {p: [] for p in modules}

    # Warm-up (not counted): compiles bytecode into PYCACHE_DIR and warms the page cache.
    print(f"warm-up: {len(stacks)} renders, {len(modules)} baselines", file=sys.stderr)
    for mods, _ in modules.values():
        run_child(BASELINE_CHILD, json.dumps(mods))
    for s in stacks:
        mods = modules[platforms[s]][0]
        run_child(RENDER_CHILD, json.dumps(mods), s, json.dumps(overrides_for(s, node_counts[0])))

    load_before = os.getloadavg()
    started = time.time()
    # Round-robin, so a slow spell on the machine spreads over every case instead of one, and
    # each render right after a baseline run of its platform: the machine's speed drifts over
    # minutes, so ratios are taken within such a pair (and within a round for the node counts).
    for rnd in range(repeat):
        for case in cases:
            mods = modules[platforms[case.stack]][0]
            case.paired.append(run_child(BASELINE_CHILD, json.dumps(mods), wait_idle=wait_idle))
            baselines[platforms[case.stack]].append(case.paired[-1])
            case.runs.append(
                run_child(
                    RENDER_CHILD,
                    json.dumps(mods),
                    case.stack,
                    json.dumps(case.overrides),
                    wait_idle=wait_idle,
                )
            )
            print(
                f"round {rnd + 1}/{repeat} {case.stack:16} nodes={case.nodes:<4} "
                f"{case.runs[-1]['seconds']:.2f}s",
                file=sys.stderr,
            )
    load_after = os.getloadavg()
    busy = [
        r["busy_before"]
        for runs in [*baselines.values(), *(c.runs for c in cases)]
        for r in runs
        if r["busy_before"] is not None
    ]

    base_summary = {
        p: {
            "modules": modules[p][0],
            "program_files_read": modules[p][1],
            "seconds_median": statistics.median(r["seconds"] for r in runs),
            "seconds_all": [r["seconds"] for r in runs],
            "seconds_min": min(r["seconds"] for r in runs),
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in runs),
            "spread": _spread([r["seconds"] for r in runs]),
            "process_seconds_median": statistics.median(r["process_seconds"] for r in runs),
            "peak_mib": _mib(max(r["peak_kib"] for r in runs)),
            "sdk_modules_loaded_count": len(runs[0]["sdk_modules_loaded"]),
        }
        for p, runs in baselines.items()
    }
    # Sanity check of the baseline: SDK modules a render executed that the baseline did not.
    for p, summary in base_summary.items():
        in_base = set(baselines[p][0]["sdk_modules_loaded"])
        summary["render_sdk_modules_not_in_baseline"] = sorted(
            {
                m
                for case in cases
                if platforms[case.stack] == p
                for m in case.runs[0]["sdk_modules_loaded"]
                if m not in in_base
            }
        )
    rows: list[dict[str, Any]] = []
    for case in cases:
        runs = case.runs
        render_s = statistics.median(r["seconds"] for r in runs)
        base = base_summary[platforms[case.stack]]
        over_sdk = [r["seconds"] / r["sdk_seconds"] for r in runs]
        rows.append(
            {
                "stack": case.stack,
                "platform": platforms[case.stack],
                "nodes": case.nodes,
                "resources": runs[0]["resources"],
                "custom_resources": runs[0]["custom_resources"],
                "kubernetes_objects": runs[0]["kubernetes_objects"],
                "output_bytes": runs[0]["output_bytes"],
                "render_seconds_median": render_s,
                "render_seconds_all": [r["seconds"] for r in runs],
                "render_spread": _spread([r["seconds"] for r in runs]),
                "render_seconds_min": min(r["seconds"] for r in runs),
                "render_over_baseline_min": min(r["seconds"] for r in runs) / base["seconds_min"],
                "render_cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in runs),
                "baseline_cpu_seconds_median": base["cpu_seconds_median"],
                "render_over_baseline_cpu": statistics.median(r["cpu_seconds"] for r in runs)
                / base["cpu_seconds_median"],
                "render_sdk_seconds_median": statistics.median(r["sdk_seconds"] for r in runs),
                "render_over_sdk_import": statistics.median(over_sdk),
                "render_over_sdk_import_all": over_sdk,
                # Issue #45's measure: what the program adds to its SDK imports, over them.
                "program_seconds_median": statistics.median(
                    r["seconds"] - r["sdk_seconds"] for r in runs
                ),
                "program_over_sdk_import": statistics.median(
                    (r["seconds"] - r["sdk_seconds"]) / r["sdk_seconds"] for r in runs
                ),
                "program_cpu_seconds_median": statistics.median(
                    r["program_cpu_seconds"] for r in runs
                ),
                "program_over_sdk_import_cpu": statistics.median(
                    r["program_cpu_seconds"] / r["sdk_cpu_seconds"] for r in runs
                ),
                "render_import_seconds_median": statistics.median(
                    r["import_seconds"] for r in runs
                ),
                "render_run_seconds_median": statistics.median(r["run_seconds"] for r in runs),
                "render_process_seconds_median": statistics.median(
                    r["process_seconds"] for r in runs
                ),
                "baseline_seconds_median": base["seconds_median"],
                "render_over_baseline": _median_ratio(
                    [r["seconds"] for r in runs], [b["seconds"] for b in case.paired]
                ),
                "render_over_baseline_of_medians": render_s / base["seconds_median"],
                "peak_mib": _mib(max(r["peak_kib"] for r in runs)),
                "baseline_peak_mib": base["peak_mib"],
                "sdk_modules_loaded_count": len(runs[0]["sdk_modules_loaded"]),
                "set_overrides": len(case.overrides),
            }
        )
    for row in rows:
        first = next(r for r in rows if r["stack"] == row["stack"])
        row["scaling_vs_smallest"] = _median_ratio(
            row["render_seconds_all"], first["render_seconds_all"]
        )
        # The same, each render first divided by its own SDK import: what the ratio is at
        # equal machine speed.
        row["scaling_vs_smallest_normalized"] = _median_ratio(
            row["render_over_sdk_import_all"], first["render_over_sdk_import_all"]
        )
        row["scaling_vs_smallest_of_medians"] = (
            row["render_seconds_median"] / first["render_seconds_median"]
        )
        row["scaling_vs_smallest_cpu"] = (
            row["render_cpu_seconds_median"] / first["render_cpu_seconds_median"]
        )
        row["scaling_vs_smallest_min"] = row["render_seconds_min"] / first["render_seconds_min"]
        # What each resource the nodes add costs the program, against the smallest node count.
        added = row["resources"] - first["resources"]
        for suffix, key in (
            ("", "program_seconds_median"),
            ("_cpu", "program_cpu_seconds_median"),
        ):
            row[f"ms_per_added_resource{suffix}"] = (
                1000 * (row[key] - first[key]) / added if added else None
            )

    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty_program_files": _git(
            "status", "--porcelain", "--", "gpu_cluster", "__main__.py", "Pulumi.*.yaml"
        ).splitlines(),
        "python": sys.version.split()[0],
        "sdk_versions": _sdk_versions(),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "runs_started_busy": sum(1 for b in busy if b > IDLE_BUSY),
            "runs": len(busy),
            "busy_before_max": max(busy, default=None),
        },
        "method": {
            "repeat": repeat,
            "node_counts": node_counts,
            "render_seconds": "median over repeats; perf_counter in a fresh child from its "
            "first SDK import to render() returning (interpreter start/exit not included)",
            "render_over_sdk_import": "median over repeats of render_seconds / the same "
            "child's own import of the baseline's SDK modules, done first and timed apart "
            "(sdk_seconds); import_seconds and run_seconds are the rest: `import "
            "gpu_cluster.offline.render` and render()",
            "baseline_seconds": "median; fresh child importing and touching the SDK modules "
            "listed under baselines.<platform>.modules; one run right before every render run",
            "render_over_baseline": "median over repeats of render / the baseline run just "
            "before it (render_over_baseline_of_medians: ratio of the medians)",
            "scaling_vs_smallest": "median over rounds of render(N) / render(smallest N) of "
            "the same round (scaling_vs_smallest_of_medians: ratio of the medians; "
            "scaling_vs_smallest_normalized: of render_over_sdk_import, i.e. at equal "
            "machine speed)",
            "peak_mib": "max over repeats of the child's ru_maxrss",
            "cpu_seconds": "time.process_time over the same span (all threads)",
            "min": "fastest repeat; *_min ratios divide fastest by fastest",
            "spread": "(max - min) / median of the repeats' wall times",
            "wait_idle": f"before each run, waited up to {wait_idle:.0f} s for the other "
            f"load on the machine to drop below {IDLE_BUSY:.0%} of its CPUs",
            "bytecode": f"warm, in {PYCACHE_DIR.relative_to(PROJECT_DIR)}",
        },
        "targets": {
            "render_over_baseline_max": TARGET_RENDER_OVER_BASELINE,
            "program_over_sdk_import_max": TARGET_PROGRAM_OVER_SDK_IMPORT,
            "ms_per_added_resource_max": TARGET_MS_PER_ADDED_RESOURCE,
            "render_largest_over_smallest_max": TARGET_SCALING,
            "peak_mib_max": TARGET_PEAK_MIB,
        },
        "baselines": base_summary,
        "rows": rows,
    }


def _sdk_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("pulumi", "pulumi_kubernetes", "pulumi_gcp", "pydantic", "PyYAML"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


# --- report ----------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(result: dict[str, Any]) -> str:
    smallest = min(result["method"]["node_counts"])
    lines = [
        f"| stack | nodes | resources | render s | of it SDK import s | render/SDK import "
        f"| program/SDK import (CPU) | ms per added resource (CPU) "
        f"| baseline s | render/baseline | render(N)/render({smallest}) "
        f"| same, speed-normalized | peak MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['stack']} | {r['nodes']} | {r['resources']} "
            f"| {r['render_seconds_median']:.2f} | {r['render_sdk_seconds_median']:.2f} "
            f"| {r['render_over_sdk_import']:.2f} "
            f"| {r['program_over_sdk_import']:.2f} ({r['program_over_sdk_import_cpu']:.2f}) "
            f"| {_ms(r['ms_per_added_resource'])} ({_ms(r['ms_per_added_resource_cpu'])}) "
            f"| {r['baseline_seconds_median']:.2f} "
            f"| {r['render_over_baseline']:.2f} | {r['scaling_vs_smallest']:.2f} "
            f"| {r['scaling_vs_smallest_normalized']:.2f} | {r['peak_mib']:.0f} |"
        )
    return "\n".join(lines)


def target_report(result: dict[str, Any]) -> str:
    rows = result["rows"]
    largest = max(result["method"]["node_counts"])
    out = ["Targets (reported, not asserted):"]

    def line(label: str, misses: list[str]) -> None:
        out.append(f"- {label}: " + ("met" if not misses else "MISSED: " + ", ".join(misses)))

    for key, label in (
        ("render_over_sdk_import", "render/SDK import (same process)"),
        ("render_over_baseline", "render/baseline (separate processes)"),
    ):
        line(
            f"{label} <= {TARGET_RENDER_OVER_BASELINE}",
            [
                f"{r['stack']}@{r['nodes']}={r[key]:.2f}"
                for r in rows
                if r[key] > TARGET_RENDER_OVER_BASELINE
            ],
        )
    for key, label in (
        ("scaling_vs_smallest_normalized", "speed-normalized"),
        ("scaling_vs_smallest", "wall time"),
    ):
        line(
            f"render({largest})/render(smallest) <= {TARGET_SCALING} ({label})",
            [
                f"{r['stack']}={r[key]:.2f}"
                for r in rows
                if r["nodes"] == largest and r[key] > TARGET_SCALING
            ],
        )
    smallest = min(result["method"]["node_counts"])
    for key, label in (("program_over_sdk_import", "wall"), ("program_over_sdk_import_cpu", "CPU")):
        line(
            f"program/SDK import at {smallest} nodes <= {TARGET_PROGRAM_OVER_SDK_IMPORT} ({label})",
            [
                f"{r['stack']}={r[key]:.2f}"
                for r in rows
                if r["nodes"] == smallest and r[key] > TARGET_PROGRAM_OVER_SDK_IMPORT
            ],
        )
    for key, label in (("ms_per_added_resource", "wall"), ("ms_per_added_resource_cpu", "CPU")):
        line(
            f"ms per resource added from {smallest} to {largest} nodes "
            f"<= {TARGET_MS_PER_ADDED_RESOURCE} ({label})",
            [
                f"{r['stack']}={r[key]:.2f}"
                for r in rows
                # None: the nodes add no resource to this stack (its pod count is a field of
                # one object: gcp-a4's JobSet, nerc-production), so nothing to judge per resource.
                if r["nodes"] == largest
                and r[key] is not None
                and r[key] > TARGET_MS_PER_ADDED_RESOURCE
            ],
        )
    line(
        f"peak < {TARGET_PEAK_MIB:.0f} MiB",
        [
            f"{r['stack']}@{r['nodes']}={r['peak_mib']:.0f}"
            for r in rows
            if r["peak_mib"] >= TARGET_PEAK_MIB
        ],
    )
    return "\n".join(out)


def noise_report(result: dict[str, Any]) -> str:
    spreads = [r["render_spread"] for r in result["rows"]] + [
        b["spread"] for b in result["baselines"].values()
    ]
    m = result["machine"]
    lines = [
        f"Noise: wall-time spread (max-min)/median over repeats: median "
        f"{statistics.median(spreads):.0%}, worst {max(spreads):.0%}; load average "
        f"{m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after "
        f"({m['cpus']} CPUs, this benchmark adds about 1); "
        f"{m['runs_started_busy']} of {m['runs']} runs started with other load above "
        f"{IDLE_BUSY:.0%} of the CPUs."
    ]
    if max(spreads) > 0.25:
        lines.append(
            "  The wall times moved with the machine: ratios within about the spread of a "
            "target are not a clear miss. Rerun idle or with more --repeat."
        )
    ends = (min(result["method"]["node_counts"]), max(result["method"]["node_counts"]))
    fastest = ", ".join(
        f"{r['stack']}@{r['nodes']} {r['render_over_baseline_min']:.2f}"
        for r in result["rows"]
        if r["nodes"] in ends
    )
    scaling = ", ".join(
        f"{r['stack']} {r['scaling_vs_smallest_min']:.2f}"
        for r in result["rows"]
        if r["nodes"] == ends[1]
    )
    lines.append(f"Fastest repeat only: render/baseline {fastest}")
    lines.append(f"Fastest repeat only: render({ends[1]})/render({ends[0]}) {scaling}")
    return "\n".join(lines)


def baseline_report(result: dict[str, Any]) -> str:
    out = ["Baselines (bare interpreter importing the program's SDK modules):"]
    for p, b in result["baselines"].items():
        out.append(
            f"- {p}: {b['seconds_median']:.2f} s (process {b['process_seconds_median']:.2f} s), "
            f"peak {b['peak_mib']:.0f} MiB; modules: {', '.join(b['modules'])}"
        )
    out.append("Whole process (interpreter start + render + interpreter exit), median:")
    for r in result["rows"]:
        if r["nodes"] == min(result["method"]["node_counts"]):
            out.append(
                f"- {r['stack']}: {r['render_process_seconds_median']:.2f} s "
                f"(measured part {r['render_seconds_median']:.2f} s: SDK imports "
                f"{r['render_sdk_seconds_median']:.2f} s, the program's own imports "
                f"{r['render_import_seconds_median']:.2f} s, render() "
                f"{r['render_run_seconds_median']:.2f} s)"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (median taken)")
    parser.add_argument(
        "--nodes", default=",".join(map(str, NODE_COUNTS)), help="comma-separated node counts"
    )
    parser.add_argument("--stacks", default=",".join(STACKS), help="comma-separated stacks")
    parser.add_argument(
        "--out", type=Path, default=RESULTS_DIR / "latest.json", help="JSON result file"
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=WAIT_IDLE_SECONDS,
        metavar="SECONDS",
        help="before each run wait up to this long for other load to settle (0: never)",
    )
    args = parser.parse_args(argv)
    node_counts = sorted(int(n) for n in args.nodes.split(","))
    stacks = [s for s in args.stacks.split(",") if s]
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    result = measure(stacks, node_counts, args.repeat, args.wait_idle)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print()
    print(target_report(result))
    print()
    print(noise_report(result))
    print()
    print(baseline_report(result))
    print(f"\nJSON: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
